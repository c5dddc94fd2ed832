// The selector filter's parser, bound and evaluation (issue 26 item 3): parse(print(ast))
// is the ast, random text never throws, the bound refuses what it says, SQL's
// three-valued logic holds, and LIKE agrees with a regex on small inputs while staying
// polynomial on the patterns that make regexes blow up.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { FilterView } from "../../src/protocol/amqpFilterView.js";
import { compileLike } from "../../src/protocol/amqpLike.js";
import {
  type Literal,
  PROPERTY_NAMES,
  parseSelector,
  SELECTOR_LIMITS,
  type SelectorNode,
} from "../../src/protocol/amqpSelector.js";
import { compileSelector, evaluateSelector } from "../../src/protocol/amqpSelectorEval.js";
import { printSelector } from "../../src/protocol/amqpSelectorPrint.js";

const RUNS = { numRuns: 1000 };

const appNames = fc.constantFrom("color", "n", "site", "my-key", "x_1", "$weird");
const literal: fc.Arbitrary<Literal> = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.integer({ min: 0, max: 1_000_000 }),
  fc.double({ min: 0, max: 1e6, noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
);
const field = fc.oneof(
  appNames.map((name) => ({ section: "application" as const, name })),
  fc.constantFrom(...PROPERTY_NAMES).map((name) => ({ section: "properties" as const, name })),
  fc.constantFrom("priority" as const, "durable" as const).map((name) => ({ section: "header" as const, name })),
);
const likeText = fc.stringMatching(/^[ab%_\\]{0,8}$/);

const ast: fc.Arbitrary<SelectorNode> = fc.letrec<{ node: SelectorNode }>((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    literal.map((v) => ({ k: "lit", v }) as SelectorNode),
    field.map((f) => ({ k: "id", field: f }) as SelectorNode),
    tie("node").map((e) => ({ k: "not", e }) as SelectorNode),
    tie("node").map((e) => ({ k: "neg", e }) as SelectorNode),
    fc
      .tuple(fc.constantFrom("and" as const, "or" as const), tie("node"), tie("node"))
      .map(([k, l, r]) => ({ k, l, r }) as SelectorNode),
    fc
      .tuple(fc.constantFrom("=", "<>", "<", ">", "<=", ">=" as const), tie("node"), tie("node"))
      .map(([op, l, r]) => ({ k: "cmp", op, l, r }) as SelectorNode),
    fc
      .tuple(fc.constantFrom("+", "-", "*", "/" as const), tie("node"), tie("node"))
      .map(([op, l, r]) => ({ k: "arith", op, l, r }) as SelectorNode),
    fc
      .tuple(fc.boolean(), tie("node"), tie("node"), tie("node"))
      .map(([not, e, lo, hi]) => ({ k: "between", not, e, lo, hi }) as SelectorNode),
    fc
      .tuple(
        fc.boolean(),
        tie("node"),
        fc.array(fc.oneof(fc.string({ maxLength: 4 }), fc.nat()), { minLength: 1, maxLength: 4 }),
      )
      .map(([not, e, list]) => ({ k: "in", not, e, list }) as SelectorNode),
    fc
      .tuple(fc.boolean(), tie("node"), likeText, fc.option(fc.constantFrom("\\", "!"), { nil: undefined }))
      .map(
        ([not, e, pattern, esc]) =>
          ({ k: "like", not, e, pattern, ...(esc !== undefined ? { escape: esc } : {}) }) as SelectorNode,
      ),
    fc.tuple(fc.boolean(), tie("node")).map(([not, e]) => ({ k: "null", not, e }) as SelectorNode),
  ),
})).node;

const filterValue = fc.oneof(fc.string({ maxLength: 4 }), fc.integer({ min: -5, max: 5 }), fc.boolean());
const view: fc.Arbitrary<FilterView> = fc.record({
  priority: fc.option(fc.integer({ min: 0, max: 9 }), { nil: undefined }),
  durable: fc.option(fc.boolean(), { nil: undefined }),
  properties: fc
    .array(fc.tuple(fc.constantFrom(...PROPERTY_NAMES), filterValue), { maxLength: 4 })
    .map((kv) => new Map(kv)),
  application: fc.array(fc.tuple(appNames, filterValue), { maxLength: 6 }).map((kv) => new Map(kv)),
});

const parsed = (text: string): SelectorNode => {
  const r = parseSelector(text);
  if (!r.ok) throw new Error(r.error);
  return r.value;
};

const nodes = (n: SelectorNode): number => {
  switch (n.k) {
    case "lit":
    case "id":
      return 1;
    case "not":
    case "neg":
    case "null":
    case "like":
      return 1 + nodes(n.e);
    case "in":
      return 1 + n.list.length + nodes(n.e);
    case "between":
      return 1 + nodes(n.e) + nodes(n.lo) + nodes(n.hi);
    default:
      return 1 + nodes(n.l) + nodes(n.r);
  }
};
const likes = (n: SelectorNode): number => printSelector(n).split(" LIKE ").length - 1;

describe("selector parser", () => {
  it("parse(print(ast)) is the ast, for every ast within the bound", () => {
    fc.assert(
      fc.property(
        ast.filter((a) => nodes(a) <= SELECTOR_LIMITS.nodes && likes(a) <= SELECTOR_LIMITS.likes),
        (a) => {
          expect(parsed(printSelector(a))).toEqual(a);
        },
      ),
      RUNS,
    );
  });

  it("never throws on any text: an AST or a reason", () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string({ maxLength: 64 }), fc.stringMatching(/^[a-z0-9 ()'=<>%_.+\-*/,!]{0,64}$/)),
        (s) => {
          const r = parseSelector(s);
          expect(r.ok || (typeof r.error === "string" && r.error.length > 0)).toBe(true);
        },
      ),
      RUNS,
    );
  });

  it("refuses each part of the bound by name", () => {
    const refused = (s: string) => {
      const r = parseSelector(s);
      return r.ok ? "accepted" : r.error;
    };
    expect(refused(`a = '${"x".repeat(SELECTOR_LIMITS.chars)}'`)).toMatch(
      /characters long; the gateway's bound is 4096/,
    );
    expect(refused(Array.from({ length: 130 }, (_, i) => `a = ${i}`).join(" OR "))).toMatch(/more than 256 terms/);
    expect(refused(`${"(".repeat(33)}a${")".repeat(33)}`)).toMatch(/nests deeper than 32/);
    expect(refused(`${"NOT ".repeat(33)}a`)).toMatch(/nests deeper than 32/);
    expect(refused(`a LIKE '${"%".repeat(257)}'`)).toMatch(/LIKE pattern at 7 is longer than 256/);
    expect(refused(Array.from({ length: 17 }, () => "a LIKE 'x'").join(" AND "))).toMatch(/more than 16 LIKE/);
    expect(refused(`${"(".repeat(32)}a = 1${")".repeat(32)}`)).toBe("accepted");
    expect(refused("header.ttl > 1")).toMatch(/header field ttl .* only priority and durable/);
    expect(refused("p.nosuch = 1")).toMatch(/not a field of the properties section/);
    expect(refused("a = 'open")).toMatch(/unterminated string starting at 4/);
    expect(refused("a # 1")).toMatch(/unexpected character "#" at 2/);
  });

  it("reads JMS header names and section prefixes as the fields they name", () => {
    expect(parsed("JMSType = 'x'")).toEqual(parsed("properties.subject = 'x'"));
    expect(parsed("JMSPriority > 4")).toEqual(parsed("h.priority > 4"));
    expect(parsed("JMSCorrelationID = 'c'")).toEqual(parsed("p.correlation-id = 'c'"));
    expect(parsed("color = 'red'")).toEqual(parsed("a.color = 'red'"));
    expect(parsed("a = 1 and B between 1 AND 2 or not c is null")).toEqual(
      parsed("((a = 1) AND (B BETWEEN 1 AND 2)) OR (NOT (c IS NULL))"),
    );
    expect(parsed("x != 'y'")).toEqual(parsed("x <> 'y'"));
  });
});

describe("selector evaluation", () => {
  const not3 = (v: boolean | undefined) => (v === undefined ? undefined : !v);
  const bool = ast.filter((a) => nodes(a) <= 40);

  it("NOT is three-valued negation; De Morgan holds; AND and OR commute", () => {
    fc.assert(
      fc.property(bool, bool, view, (a, b, m) => {
        expect(evaluateSelector({ k: "not", e: a }, m)).toBe(not3(evaluateSelector(a, m)));
        const and = evaluateSelector({ k: "and", l: a, r: b }, m);
        expect(evaluateSelector({ k: "and", l: b, r: a }, m)).toBe(and);
        expect(evaluateSelector({ k: "or", l: b, r: a }, m)).toBe(evaluateSelector({ k: "or", l: a, r: b }, m));
        expect(evaluateSelector({ k: "or", l: { k: "not", e: a }, r: { k: "not", e: b } }, m)).toBe(not3(and));
      }),
      RUNS,
    );
  });

  it("a message is selected only when the selector is true (unknown selects nothing)", () => {
    fc.assert(
      fc.property(bool, view, (a, m) => {
        expect(compileSelector(a)(m)).toBe(evaluateSelector(a, m) === true);
      }),
      RUNS,
    );
  });

  it("follows JMS on missing fields, unlike types and defaults", () => {
    const m: FilterView = {
      priority: undefined,
      durable: undefined,
      properties: new Map([["subject", "order.created"]]),
      application: new Map<string, string | number | boolean>([
        ["color", "red"],
        ["n", 5],
        ["text5", "5"],
      ]),
    };
    const sel = (s: string) => evaluateSelector(parsed(s), m);
    expect(sel("missing = 1")).toBeUndefined();
    expect(sel("missing IS NULL")).toBe(true);
    expect(sel("NOT (missing = 1)")).toBeUndefined();
    expect(sel("missing = 1 OR color = 'red'")).toBe(true);
    expect(sel("missing = 1 AND color = 'blue'")).toBe(false);
    expect(sel("text5 = 5")).toBe(false);
    expect(sel("n BETWEEN 1 AND 5 AND n * 2 = 10 AND -n < 0 AND n / 0 IS NULL")).toBe(true);
    expect(sel("JMSPriority = 4 AND header.durable = FALSE")).toBe(true);
    expect(sel("JMSType LIKE 'order.%' AND color IN ('red', 'blue') AND color NOT IN ('green')")).toBe(true);
    expect(sel("color LIKE 'r_d' AND color NOT LIKE 'r\\%' ESCAPE '\\'")).toBe(true);
  });
});

describe("LIKE without regex", () => {
  const reference = (pattern: string, esc: string | undefined): RegExp => {
    let re = "";
    const cps = Array.from(pattern);
    for (let i = 0; i < cps.length; i++) {
      const c = cps[i]!;
      if (esc !== undefined && c === esc && i + 1 < cps.length) re += cps[++i]!.replace(/[\\^$.*+?()[\]{}|]/g, "\\$&");
      else if (c === "%") re += ".*";
      else if (c === "_") re += ".";
      else re += c.replace(/[\\^$.*+?()[\]{}|]/g, "\\$&");
    }
    return new RegExp(`^${re}$`, "su");
  };

  it("agrees with the regex it replaces on small alphabets", () => {
    fc.assert(
      fc.property(
        likeText,
        fc.stringMatching(/^[ab%_\\]{0,10}$/),
        fc.option(fc.constant("\\"), { nil: undefined }),
        (p, v, e) => {
          expect(compileLike(p, e)(v)).toBe(reference(p, e).test(v));
        },
      ),
      { numRuns: 5000 },
    );
  });

  it("takes polynomial time on the patterns that make backtracking regexes blow up", () => {
    const pattern = `${"%a".repeat(120)}%b`;
    const value = "a".repeat(20_000);
    const started = performance.now();
    expect(compileLike(pattern)(value)).toBe(false);
    // 20,000 x 242 steps at most: well under a second even on a loaded machine.
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});
