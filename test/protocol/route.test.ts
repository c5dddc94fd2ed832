import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  agreesWithProps,
  buildSubject,
  decodeRouteValue,
  encodeRouteValue,
  firstDisagreement,
  matchBuiltSubject,
  type Props,
  parseTemplate,
  type RouteTemplate,
} from "../../src/protocol/route.js";
import { isWhitespaceOrControl, subjectToTopic } from "../../src/protocol/topic.js";

const RUNS = { numRuns: 5000 };

function template(text: string): RouteTemplate {
  const r = parseTemplate(text);
  if (!r.ok) throw new Error(`refused ${text}: ${r.error}`);
  return r.value;
}

const propsOf =
  (record: Record<string, string>): Props =>
  (name) =>
    Object.hasOwn(record, name) ? record[name] : undefined;

describe("spec table: Routes (mapping-to-nats.md)", () => {
  const orders = template("orders.{region}");

  it("orders.{region} + region=eu -> orders.eu", () => {
    expect(buildSubject(orders, propsOf({ region: "eu" }))).toEqual({ ok: true, value: "orders.eu" });
  });

  it("orders.{region} + region=eu west -> orders.eu%20west", () => {
    expect(buildSubject(orders, propsOf({ region: "eu west" }))).toEqual({ ok: true, value: "orders.eu%20west" });
  });

  it("orders.{region} + no property -> refused, naming region", () => {
    expect(buildSubject(orders, propsOf({ zone: "eu" }))).toEqual({ ok: false, error: { missing: "region" } });
  });

  it("MQTT subscribers see the encoded value in the topic: orders/eu%20west", () => {
    const built = buildSubject(orders, propsOf({ region: "eu west" }));
    expect(built.ok && subjectToTopic(built.value)).toBe("orders/eu%20west");
  });

  it("a send to orders.eu with region=us is handled like one without the property", () => {
    expect(agreesWithProps(orders, "orders.eu", propsOf({ region: "us" }))).toBe(false);
    expect(agreesWithProps(orders, "orders.eu", propsOf({}))).toBe(false);
    expect(firstDisagreement(orders, "orders.eu", propsOf({ region: "us" }))).toBe("region");
    expect(agreesWithProps(orders, "orders.eu", propsOf({ region: "eu" }))).toBe(true);
  });
});

describe("encodeRouteValue (spec rules)", () => {
  it.each([
    ["a dot", "v1.2", "v1%2E2"],
    ["a percent sign", "50%", "50%25"],
    ["a slash", "a/b", "a%2Fb"],
    ["a plus", "a+b", "a%2Bb"],
    ["a hash", "a#b", "a%23b"],
    ["a space", "eu west", "eu%20west"],
    ["a tab", "a\tb", "a%09b"],
    ["a newline", "a\nb", "a%0Ab"],
    ["NUL", "a\x00b", "a%00b"],
    ["DEL", "a\x7fb", "a%7Fb"],
    ["a C1 control", "a\u0085b", "a%C2%85b"],
    ["a no-break space", "a\u00a0b", "a%C2%A0b"],
    ["an ideographic space", "a\u3000b", "a%E3%80%80b"],
    ["an empty value", "", "%"],
    ["exactly *", "*", "%2A"],
    ["exactly >", ">", "%3E"],
    ["* inside a value (a literal token for NATS)", "a*", "a*"],
    ["> inside a value", ">>", ">>"],
    ["non-ASCII, kept", "zürich", "zürich"],
    ["an emoji, kept", "😀", "😀"],
    ["a lone surrogate, as U+FFFD", "a\ud800", "a%EF%BF%BD"],
    ["a leading $ (a value never names a system namespace)", "$SYS", "%24SYS"],
    ["a lone $", "$", "%24"],
    ["a leading $ with more to encode", "$a.b", "%24a%2Eb"],
    ["$ inside a value, kept", "US$", "US$"],
    ["a plain value, unchanged", "eu", "eu"],
  ])("%s: %j -> %j", (_name, value, encoded) => {
    expect(encodeRouteValue(value)).toBe(encoded);
  });

  it.each([
    ["%", ""],
    ["%2A", "*"],
    ["%2a", "*"],
    ["eu%20west", "eu west"],
    ["100%", "100%"],
    ["%2", "%2"],
    ["%G0", "%G0"],
    ["%C3%BC", "ü"],
    ["%FF", "\ufffd"],
    ["%EF%BB%BFx", "\ufeffx"],
    ["%24MQG", "$MQG"],
  ])("decodeRouteValue(%j) -> %j", (encoded, value) => {
    expect(decodeRouteValue(encoded)).toBe(value);
  });
});

describe("parseTemplate", () => {
  it("splits literals and whole-token placeholders", () => {
    expect(parseTemplate("orders.{region}.{kind}.v1")).toEqual({
      ok: true,
      value: {
        template: "orders.{region}.{kind}.v1",
        tokens: [
          { kind: "literal", text: "orders" },
          { kind: "property", name: "region" },
          { kind: "property", name: "kind" },
          { kind: "literal", text: "v1" },
        ],
        names: ["region", "kind"],
      },
    });
  });

  it.each(["{region}", "{region}.orders", "a.{x-y_z:1}", "spBv1//0.{group}", "$app.{ü}"])("accepts %s", (t) => {
    expect(parseTemplate(t).ok).toBe(true);
  });

  it.each([
    ["empty", "", "empty"],
    ["no placeholder", "orders.eu", "no {name}"],
    ["unbalanced {", "orders.{region", "unbalanced"],
    ["unbalanced }", "orders.region}", "unbalanced"],
    ["reversed braces", "orders.}region{", "unbalanced"],
    ["nested braces", "orders.{{region}}", "unbalanced"],
    ["empty name", "orders.{}", "empty placeholder"],
    ["a mixed token", "orders.eu-{zone}", "whole token"],
    ["two placeholders in a token", "orders.{a}{b}", "unbalanced"],
    ["a * token", "orders.*.{region}", "wildcard"],
    ["a > token", "orders.{region}.>", "wildcard"],
    ["an MQTT wildcard", "orders.#.{region}", "wildcard"],
    ["an empty token", "orders..{region}", "empty token"],
    ["a leading dot", ".{region}", "empty token"],
    ["a trailing dot", "{region}.", "empty token"],
    ["whitespace", "orders.{re gion}", "whitespace"],
    ["a control character", "orders\x01.{region}", "control"],
    ["a name used twice", "{a}.{a}", "twice"],
    ["the gateway's namespace", "$MQG.{a}", "reserved for the gateway"],
    ["the gateway's client inboxes", "_INBOX.MQGW.{a}", "reserved for the gateway"],
  ])("refuses %s: %j", (_name, text, reason) => {
    const r = parseTemplate(text);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toContain(reason);
  });
});

describe("buildSubject / matchBuiltSubject", () => {
  const t = template("orders.{region}.{kind}");

  it("names the first missing property in template order", () => {
    expect(buildSubject(t, propsOf({}))).toEqual({ ok: false, error: { missing: "region" } });
    expect(buildSubject(t, propsOf({ region: "eu" }))).toEqual({ ok: false, error: { missing: "kind" } });
  });

  it.each([
    ["orders.eu.new", { region: "eu", kind: "new" }],
    ["orders.%.%2A", { region: "", kind: "*" }],
    ["orders.eu%20west.a%2Eb", { region: "eu west", kind: "a.b" }],
  ])("matches %s", (subject, props) => {
    expect(matchBuiltSubject(t, subject)).toEqual(props);
  });

  it.each([
    ["too few tokens", "orders.eu"],
    ["too many tokens", "orders.eu.new.x"],
    ["another literal", "order.eu.new"],
    ["lower-case hex (we never write it)", "orders.eu%2ewest.new"],
    ["a broken escape", "orders.eu%2.new"],
    ["an unencoded wildcard", "orders.*.new"],
    ["a character we would encode", "orders.a+b.new"],
    ["the route's own subject", "orders"],
  ])("does not match %s: %s", (_name, subject) => {
    expect(matchBuiltSubject(t, subject)).toBeUndefined();
  });

  it("a subject the template does not make has nothing to disagree with", () => {
    expect(agreesWithProps(t, "orders.eu", propsOf({}))).toBe(true);
    expect(firstDisagreement(t, "invoices.eu.new", propsOf({ region: "us" }))).toBeUndefined();
  });

  it("names the disagreeing property, missing or different", () => {
    expect(firstDisagreement(t, "orders.eu.new", propsOf({ region: "eu" }))).toBe("kind");
    expect(firstDisagreement(t, "orders.eu.new", propsOf({ region: "eu", kind: "old" }))).toBe("kind");
    expect(firstDisagreement(t, "orders.eu.new", propsOf({ region: "us", kind: "new" }))).toBe("region");
    expect(firstDisagreement(t, "orders.%.new", propsOf({ region: "", kind: "new" }))).toBeUndefined();
  });

  it("a property called __proto__ is an ordinary value", () => {
    const p = template("x.{__proto__}");
    expect(Object.entries(matchBuiltSubject(p, "x.v") ?? {})).toEqual([["__proto__", "v"]]);
    const props: Props = (name) => (name === "__proto__" ? "v" : undefined);
    expect(agreesWithProps(p, "x.v", props)).toBe(true);
    expect(agreesWithProps(p, "x.w", props)).toBe(false);
  });
});

// ---- properties ----------------------------------------------------------

/** Any well-formed text, weighted towards the characters the encoding cares about. */
const value = fc.oneof(
  fc.string({ unit: "binary", maxLength: 12 }),
  fc.string({
    unit: fc.constantFrom(..."a.%/+#*> \t\x00\x7f\u0085\u2028é😀\ufeff"),
    maxLength: 8,
  }),
  fc.constantFrom("", "*", ">", "%", "%2A", "%%", "%25", "$", "$MQG", "$JS", "MQGW", "%24MQG", "alive", "retained"),
  fc.string({ unit: fc.constantFrom(..."$MQG.a"), maxLength: 6 }),
);

const isValidPublishSubject = (s: string): boolean =>
  s.split(".").every((tok) => tok !== "" && tok !== "*" && tok !== ">") &&
  ![...s].some((ch) => isWhitespaceOrControl(ch.codePointAt(0)!));

const templates = fc.constantFrom(
  "orders.{region}",
  "{a}",
  "{a}.{b}",
  "{a}.{b}.{region}",
  "x.{a}.y.{b}.z",
  "$app.{a}",
  "a//b.{a}",
  "_INBOX.{a}.{b}",
);

describe("properties", () => {
  it("decodeRouteValue(encodeRouteValue(v)) === v", () => {
    fc.assert(
      fc.property(value, (v) => {
        expect(decodeRouteValue(encodeRouteValue(v))).toBe(v);
      }),
      RUNS,
    );
  });

  it("an encoded value is one literal NATS token with none of the encoded characters", () => {
    fc.assert(
      fc.property(value, (v) => {
        const e = encodeRouteValue(v);
        expect(e).not.toBe("");
        expect(e).not.toMatch(/[./+#]/);
        expect(isValidPublishSubject(e)).toBe(true);
        // Every % starts an upper-case escape, except the lone % of the empty value.
        if (e !== "%") expect(e.replace(/%[0-9A-F]{2}/g, "")).not.toContain("%");
      }),
      RUNS,
    );
  });

  it("a value never starts a token with $, so a route cannot name $MQG, $JS or $SYS, nor hide from MQTT's # and +", () => {
    fc.assert(
      fc.property(templates, value, value, value, (text, a, b, region) => {
        const built = buildSubject(template(text), propsOf({ a, b, region }));
        if (!built.ok) throw new Error("unreachable");
        const literals = new Set(template(text).tokens.flatMap((t) => (t.kind === "literal" ? [t.text] : [])));
        for (const tok of built.value.split(".")) if (!literals.has(tok)) expect(tok.startsWith("$")).toBe(false);
      }),
      RUNS,
    );
  });

  it("built subjects are valid NATS publish subjects that reach MQTT", () => {
    fc.assert(
      fc.property(templates, value, value, value, (text, a, b, region) => {
        const built = buildSubject(template(text), propsOf({ a, b, region }));
        expect(built.ok).toBe(true);
        if (!built.ok) return;
        expect(isValidPublishSubject(built.value)).toBe(true);
        expect(subjectToTopic(built.value)).toBeDefined();
      }),
      RUNS,
    );
  });

  it("buildSubject then matchBuiltSubject gives back the properties", () => {
    fc.assert(
      fc.property(templates, value, value, value, (text, a, b, region) => {
        const t = template(text);
        const props = propsOf({ a, b, region });
        const built = buildSubject(t, props);
        if (!built.ok) throw new Error("unreachable");
        const expected = Object.fromEntries(t.names.map((n) => [n, props(n)!]));
        expect({ ...matchBuiltSubject(t, built.value) }).toEqual(expected);
        expect(agreesWithProps(t, built.value, props)).toBe(true);
      }),
      RUNS,
    );
  });

  it("a subject matches a template exactly when the template builds it from the matched values", () => {
    const token = fc.constantFrom("orders", "eu", "%", "%2A", "%2a", "%2", "a%20b", "*", "x", "é");
    const subject = fc.array(token, { minLength: 1, maxLength: 4 }).map((ts) => ts.join("."));
    fc.assert(
      fc.property(templates, subject, (text, s) => {
        const t = template(text);
        const values = matchBuiltSubject(t, s);
        if (values !== undefined) expect(buildSubject(t, propsOf(values))).toEqual({ ok: true, value: s });
      }),
      RUNS,
    );
  });

  it("a changed property value disagrees", () => {
    fc.assert(
      fc.property(value, value, (v, w) => {
        fc.pre(v !== w);
        const t = template("orders.{region}");
        const built = buildSubject(t, propsOf({ region: v }));
        if (!built.ok) throw new Error("unreachable");
        expect(agreesWithProps(t, built.value, propsOf({ region: w }))).toBe(false);
      }),
      RUNS,
    );
  });
});
