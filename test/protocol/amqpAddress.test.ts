import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  classifySource,
  classifyTarget,
  subjectIsAdmin,
  tooManyTokens,
  validateRelayTo,
} from "../../src/protocol/amqpAddress.js";

const RUNS = { numRuns: 2000 };
const refusal = (condition: string) =>
  expect.objectContaining({ ok: false, error: expect.objectContaining({ condition }) });
const INVALID = "amqp:invalid-field";
const UNAUTHORIZED = "amqp:unauthorized-access";

describe("the spec's address table", () => {
  it("Target orders.eu publishes to orders.eu", () => {
    expect(classifyTarget("orders.eu", false)).toEqual({ ok: true, value: { kind: "subject", subject: "orders.eu" } });
  });
  it("Target orders/eu is the one-token subject orders/eu", () => {
    expect(classifyTarget("orders/eu", false)).toEqual({ ok: true, value: { kind: "subject", subject: "orders/eu" } });
  });
  it("Source orders.* reads with the wildcard", () => {
    expect(classifySource("orders.*", false)).toEqual({ ok: true, value: { kind: "wildcard", subject: "orders.*" } });
  });
  it("Source orders.> reads with the wildcard", () => {
    expect(classifySource("orders.>", false)).toEqual({ ok: true, value: { kind: "wildcard", subject: "orders.>" } });
  });
  it("Source orders.eu is an exact subject", () => {
    expect(classifySource("orders.eu", false)).toEqual({ ok: true, value: { kind: "subject", subject: "orders.eu" } });
  });
  it("Null target is the anonymous relay", () => {
    expect(classifyTarget(null, false)).toEqual({ ok: true, value: { kind: "anonymous" } });
    expect(classifyTarget(undefined, false)).toEqual({ ok: true, value: { kind: "anonymous" } });
    expect(classifyTarget("", false)).toEqual({ ok: true, value: { kind: "anonymous" } });
  });
  it("Dynamic source or target is a new inbox", () => {
    expect(classifyTarget(null, true)).toEqual({ ok: true, value: { kind: "dynamic" } });
    expect(classifySource(undefined, true)).toEqual({ ok: true, value: { kind: "dynamic" } });
  });
  it("Source orders.eu::billing reads from the operator's consumer billing", () => {
    expect(classifySource("orders.eu::billing", false)).toEqual({
      ok: true,
      value: { kind: "queue", subject: "orders.eu", queue: "billing", wildcard: false },
    });
  });
  it("an operator queue's address may hold wildcards", () => {
    expect(classifySource("orders.>::all", false)).toEqual({
      ok: true,
      value: { kind: "queue", subject: "orders.>", queue: "all", wildcard: true },
    });
  });
});

describe("refusals (CONTRACT.md error table)", () => {
  const cases: Array<[string, () => unknown, string]> = [
    ["a target with * is invalid", () => classifyTarget("orders.*", false), INVALID],
    ["a target with > is invalid", () => classifyTarget("orders.>", false), INVALID],
    ["a target with an empty token is invalid", () => classifyTarget("orders..eu", false), INVALID],
    ["a target ending in . is invalid", () => classifyTarget("orders.", false), INVALID],
    ["a target starting with . is invalid", () => classifyTarget(".orders", false), INVALID],
    ["a target with a space is invalid", () => classifyTarget("orders eu", false), INVALID],
    ["a target with a tab is invalid", () => classifyTarget("orders\teu", false), INVALID],
    ["a target with Unicode whitespace is invalid", () => classifyTarget("orders\u3000eu", false), INVALID],
    ["a target with DEL is invalid", () => classifyTarget("orders\x7f", false), INVALID],
    ["a target under $MQG. is unauthorized", () => classifyTarget("$MQG.admin.list", false), UNAUTHORIZED],
    ["the target $MQG itself is unauthorized", () => classifyTarget("$MQG", false), UNAUTHORIZED],
    ["a source under $MQG. is unauthorized", () => classifySource("$MQG.alive.gw1", false), UNAUTHORIZED],
    ["a source $MQG.> is unauthorized", () => classifySource("$MQG.>", false), UNAUTHORIZED],
    ["an operator queue on $MQG is unauthorized", () => classifySource("$MQG.admin::q", false), UNAUTHORIZED],
    ["a source with an empty token is invalid", () => classifySource("orders..*", false), INVALID],
    ["a source with whitespace is invalid", () => classifySource("orders. eu", false), INVALID],
    ["a source with > not last is invalid", () => classifySource("orders.>.eu", false), INVALID],
    ["a source with no address is invalid", () => classifySource(null, false), INVALID],
    ["a queue with no name is invalid", () => classifySource("orders.eu::", false), INVALID],
    ["a queue with no address is invalid", () => classifySource("::billing", false), INVALID],
    ["a queue name with . is invalid", () => classifySource("orders.eu::a.b", false), INVALID],
    ["a queue name with * is invalid", () => classifySource("orders.eu::a*", false), INVALID],
    ["a queue name with > is invalid", () => classifySource("orders.eu::a>", false), INVALID],
    ["a queue name with / is invalid", () => classifySource("orders.eu::a/b", false), INVALID],
    ["a queue name with \\ is invalid", () => classifySource("orders.eu::a\\b", false), INVALID],
    ["a queue name with whitespace is invalid", () => classifySource("orders.eu::a b", false), INVALID],
    ["a dynamic target with an address is invalid", () => classifyTarget("orders", true), INVALID],
    ["a dynamic source with an address is invalid", () => classifySource("orders", true), INVALID],
  ];
  for (const [name, run, condition] of cases) it(name, () => expect(run()).toEqual(refusal(condition)));

  it("a * inside a token is no wildcard (NATS reads only whole tokens)", () => {
    expect(classifyTarget("orders.a*b.c>", false).ok).toBe(true);
    expect(classifySource("orders.a*b", false)).toEqual({
      ok: true,
      value: { kind: "subject", subject: "orders.a*b" },
    });
  });
  it("the refusal says what is wrong", () => {
    const r = classifyTarget("orders.*", false);
    expect(r.ok === false && r.error.description).toContain("wildcard *");
  });
});

describe("the anonymous relay's to", () => {
  it("a valid to is the subject", () => expect(validateRelayTo("orders.eu")).toEqual({ ok: true, value: "orders.eu" }));
  it("a missing to is invalid", () => expect(validateRelayTo(undefined)).toEqual(refusal(INVALID)));
  it("a wildcard to is invalid", () => expect(validateRelayTo("orders.*")).toEqual(refusal(INVALID)));
  it("a to under $MQG is unauthorized", () =>
    expect(validateRelayTo("$MQG.admin.kick")).toEqual(refusal(UNAUTHORIZED)));
});

describe("admin subjects", () => {
  it("$MQG and everything under $MQG. are admin", () => {
    expect(subjectIsAdmin("$MQG")).toBe(true);
    expect(subjectIsAdmin("$MQG.admin.list")).toBe(true);
    expect(subjectIsAdmin("$MQG.alive.gw-1")).toBe(true);
  });
  it("$MQGW (the spec's typo for $MQG) and look-alikes are ordinary subjects", () => {
    expect(subjectIsAdmin("$MQGW.admin.list")).toBe(false);
    expect(subjectIsAdmin("$MQGX")).toBe(false);
    expect(subjectIsAdmin("$mqg.admin")).toBe(false);
    expect(subjectIsAdmin("x.$MQG")).toBe(false);
  });
});

// ---------------------------------------------------------------------------------------

const token = fc.oneof(
  fc.constantFrom("*", ">", "", "$MQG", "orders", "eu", " ", "a b", "\t", "a*b", "::", "q"),
  fc.string({ unit: "binary", maxLength: 6 }),
);
const address = fc.array(token, { minLength: 1, maxLength: 5 }).map((ts) => ts.join("."));
/**
 * Written apart from the code under test: Unicode White_Space (the gateway's definition,
 * topic.ts; JavaScript's \s would also count U+FEFF) plus the C0 and C1 controls and DEL.
 */
const hasWhitespaceOrControl = (s: string) =>
  /\p{White_Space}/u.test(s) ||
  [...s].some((c) => {
    const cp = c.codePointAt(0)!;
    return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
  });

describe("properties", () => {
  it("a target that classifies ok has no wildcard, empty token, whitespace or $MQG prefix", () => {
    fc.assert(
      fc.property(address, (a) => {
        const r = classifyTarget(a, false);
        if (!r.ok || r.value.kind !== "subject") return;
        const tokens = r.value.subject.split(".");
        expect(tokens).not.toContain("*");
        expect(tokens).not.toContain(">");
        expect(tokens).not.toContain("");
        expect(hasWhitespaceOrControl(r.value.subject)).toBe(false);
        expect(subjectIsAdmin(r.value.subject)).toBe(false);
        expect(r.value.subject).toBe(a);
      }),
      { ...RUNS, examples: [["\ufeff"]] },
    );
  });

  it("the relay's to follows exactly the target rules", () => {
    fc.assert(
      // An empty address is the relay itself as a target, and a missing to on a message.
      fc.property(
        address.filter((a) => a !== ""),
        (a) => {
          const t = classifyTarget(a, false);
          const to = validateRelayTo(a);
          expect(to.ok).toBe(t.ok);
          if (!t.ok && !to.ok) expect(to.error.condition).toBe(t.error.condition);
        },
      ),
      RUNS,
    );
  });

  it("a source that classifies ok has > only last, no empty token, no whitespace, no $MQG prefix", () => {
    fc.assert(
      fc.property(address, fc.option(fc.string({ unit: "binary", maxLength: 6 })), (a, q) => {
        const r = classifySource(q === null ? a : `${a}::${q}`, false);
        if (!r.ok || r.value.kind === "dynamic") return;
        const tokens = r.value.subject.split(".");
        expect(tokens).not.toContain("");
        expect(tokens.indexOf(">")).toBeLessThanOrEqual(tokens.length - 1);
        if (tokens.includes(">")) expect(tokens.at(-1)).toBe(">");
        expect(hasWhitespaceOrControl(r.value.subject)).toBe(false);
        expect(subjectIsAdmin(r.value.subject)).toBe(false);
        const wild = tokens.includes("*") || tokens.includes(">");
        if (r.value.kind === "queue") {
          expect(r.value.queue).not.toMatch(/[\s.*>/\\]/u);
          expect(r.value.wildcard).toBe(wild);
        } else {
          expect(r.value.kind).toBe(wild ? "wildcard" : "subject");
        }
      }),
      RUNS,
    );
  });

  it("every address under $MQG. is refused as unauthorized when it is otherwise well formed", () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z]{1,5}(\.[a-z]{1,5}){0,3}$/), (rest) => {
        expect(classifyTarget(`$MQG.${rest}`, false)).toEqual(refusal(UNAUTHORIZED));
        expect(classifySource(`$MQG.${rest}`, false)).toEqual(refusal(UNAUTHORIZED));
      }),
      RUNS,
    );
  });
});

describe("limits.max_topic_levels on AMQP addresses", () => {
  it("refuses an address of more tokens than the limit (invalid-field); 0 is no limit", () => {
    expect(tooManyTokens("a.b.c.d", 4)).toBeUndefined();
    expect(tooManyTokens("a.b.c.d.e", 4)).toMatchObject({ condition: INVALID });
    expect(tooManyTokens("a.b.c.d.e", 0)).toBeUndefined();
  });
  it("counts tokens as the subject's dots plus one, whatever the tokens are", () => {
    fc.assert(
      fc.property(
        fc.array(fc.stringMatching(/^[a-z*>]{1,3}$/), { minLength: 1, maxLength: 12 }),
        fc.nat(12),
        (tokens, max) => {
          const refused = tooManyTokens(tokens.join("."), max) !== undefined;
          expect(refused).toBe(max > 0 && tokens.length > max);
        },
      ),
      RUNS,
    );
  });
});
