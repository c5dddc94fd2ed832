import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  deliverableTo,
  filterToSubscription,
  isWhitespaceOrControl,
  MAX_TOPIC_BYTES,
  publishTopicToSubject,
  subjectToTopic,
  topicMatchesFilter,
  utf8Length,
} from "../../src/protocol/topic.js";

const RUNS = { numRuns: 3000 };

/** The subject of a topic that must be accepted. */
function subjectOf(topic: string): string {
  const r = publishTopicToSubject(topic);
  if (!r.ok) throw new Error(`refused ${JSON.stringify(topic)}: ${r.error}`);
  return r.value;
}

function subscriptionOf(filter: string) {
  const r = filterToSubscription(filter);
  if (!r.ok) throw new Error(`refused ${JSON.stringify(filter)}: ${r.error}`);
  return r.value;
}

describe("spec table: MQTT topics (mapping-to-nats.md)", () => {
  it.each([
    ["plant/line1/temp", "plant.line1.temp"],
    ["spBv1.0/G1", "spBv1//0.G1"],
    ["/plant", "/.plant"],
    ["plant/", "plant./"],
    ["plant//temp", "plant./.temp"],
  ])("publish %s -> %s (and back)", (topic, subject) => {
    expect(publishTopicToSubject(topic)).toEqual({ ok: true, value: subject });
    expect(subjectToTopic(subject)).toBe(topic);
  });

  it("plant/+/temp -> plant.*.temp", () => {
    expect(filterToSubscription("plant/+/temp")).toEqual({
      ok: true,
      value: { subjects: ["plant.*.temp"], dollarGuard: false },
    });
  });

  it("plant/# -> plant.> and plant", () => {
    expect(subscriptionOf("plant/#").subjects).toEqual(["plant.>", "plant"]);
  });

  it("# -> >", () => {
    expect(subscriptionOf("#")).toEqual({ subjects: [">"], dollarGuard: true });
  });

  it("$share/g1/plant/+ -> plant.*, queue group g1", () => {
    expect(subscriptionOf("$share/g1/plant/+")).toEqual({ subjects: ["plant.*"], queue: "g1", dollarGuard: false });
  });
});

describe("spec rules: MQTT topics", () => {
  it.each([
    ["space", "plant/line 1"],
    ["tab", "plant\tline"],
    ["DEL", "plant\x7fline"],
  ])("refuses a topic and a filter with %s", (_name, text) => {
    expect(publishTopicToSubject(text).ok).toBe(false);
    expect(filterToSubscription(text).ok).toBe(false);
  });

  it.each(["*", ">", "plant/*", "plant/>/temp", "*/plant"])("refuses the filter %s (a level of only * or >)", (f) => {
    expect(filterToSubscription(f).ok).toBe(false);
  });

  it.each(["plant/+", "plant/#", "+", "#", "plant+", "a#b"])("refuses + or # in the publish topic %s", (t) => {
    expect(publishTopicToSubject(t).ok).toBe(false);
  });

  it.each(["*", ">", "plant/*", "plant/>/temp"])("refuses the publish topic %s (a level of only * or >)", (t) => {
    expect(publishTopicToSubject(t).ok).toBe(false);
  });

  it.each(["+", "#", "+/temp", "+/#"])("the filter %s does not match topics that start with $", (f) => {
    expect(subscriptionOf(f).dollarGuard).toBe(true);
    expect(topicMatchesFilter("$SYS/temp", f)).toBe(false);
    expect(topicMatchesFilter("plant/temp", f) || f === "+").toBe(true);
  });

  it("$SYS/# still matches $SYS topics", () => {
    expect(subscriptionOf("$SYS/#").dollarGuard).toBe(false);
    expect(topicMatchesFilter("$SYS/broker/load", "$SYS/#")).toBe(true);
  });

  it.each(["plant.+.temp", "plant.#", "a+b", "#"])("a subject holding + or # is not delivered: %s", (s) => {
    expect(subjectToTopic(s)).toBeUndefined();
  });

  it.each([
    ["plant.*", "plant/*"],
    ["plant.>", "plant/>"],
    ["*.temp", "*/temp"],
    ["a*b.c>d", "a*b/c>d"],
  ])("* and > in a subject stay as they are: %s -> %s", (subject, topic) => {
    expect(subjectToTopic(subject)).toBe(topic);
  });

  it("$ subjects are not treated differently", () => {
    expect(subjectOf("$JS/API/INFO")).toBe("$JS.API.INFO");
    expect(subjectToTopic("$JS.API.INFO")).toBe("$JS/API/INFO");
  });
});

describe("nats-server TestMQTTTopicAndSubjectConversion", () => {
  // [name, MQTT topic, NATS subject], copied as data from server/mqtt_test.go.
  it.each([
    ["/", "/", "/./"],
    ["//", "//", "/././"],
    ["///", "///", "/./././"],
    ["////", "////", "/././././"],
    ["foo", "foo", "foo"],
    ["/foo", "/foo", "/.foo"],
    ["//foo", "//foo", "/./.foo"],
    ["///foo", "///foo", "/././.foo"],
    ["///foo/", "///foo/", "/././.foo./"],
    ["///foo//", "///foo//", "/././.foo././"],
    ["///foo///", "///foo///", "/././.foo./././"],
    ["//.foo.//", "//.foo.//", "/././/foo//././"],
    ["foo/bar", "foo/bar", "foo.bar"],
    ["/foo/bar", "/foo/bar", "/.foo.bar"],
    ["/foo/bar/", "/foo/bar/", "/.foo.bar./"],
    ["foo/bar/baz", "foo/bar/baz", "foo.bar.baz"],
    ["/foo/bar/baz", "/foo/bar/baz", "/.foo.bar.baz"],
    ["/foo/bar/baz/", "/foo/bar/baz/", "/.foo.bar.baz./"],
    ["bar", "bar/", "bar./"],
    ["bar//", "bar//", "bar././"],
    ["bar///", "bar///", "bar./././"],
    ["foo//bar", "foo//bar", "foo./.bar"],
    ["foo///bar", "foo///bar", "foo././.bar"],
    ["foo////bar", "foo////bar", "foo./././.bar"],
    [".", ".", "//"],
    ["..", "..", "////"],
    ["...", "...", "//////"],
    ["./", "./", "//./"],
    [".//.", ".//.", "//././/"],
    ["././.", "././.", "//.//.//"],
    ["././/.", "././/.", "//.//././/"],
    [".foo", ".foo", "//foo"],
    ["foo.", "foo.", "foo//"],
    [".foo.", ".foo.", "//foo//"],
    ["foo../bar/", "foo../bar/", "foo////.bar./"],
    ["foo../bar/.", "foo../bar/.", "foo////.bar.//"],
    ["/foo/", "/foo/", "/.foo./"],
    ["./foo/.", "./foo/.", "//.foo.//"],
    ["foo.bar/baz", "foo.bar/baz", "foo//bar.baz"],
  ])("%s: %s <-> %s", (_name, topic, subject) => {
    expect(publishTopicToSubject(topic)).toEqual({ ok: true, value: subject });
    expect(subjectToTopic(subject)).toBe(topic);
  });

  it.each([
    ["foo/+", "wildcards"],
    ["foo/#", "wildcards"],
    ["foo bar", "whitespace"],
    ["foo\x7fbar", "control"],
  ])("refuses %j (%s)", (topic, reason) => {
    const r = publishTopicToSubject(topic);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toContain(reason);
  });
});

describe("nats-server TestMQTTFilterConversion", () => {
  // [name, MQTT filter, NATS subject] from server/mqtt_test.go; the filter's first subject.
  it.each([
    ["single level wildcard", "+", "*"],
    ["single level wildcard", "/+", "/.*"],
    ["single level wildcard", "+/", "*./"],
    ["single level wildcard", "/+/", "/.*./"],
    ["single level wildcard", "foo/+", "foo.*"],
    ["single level wildcard", "foo/+/", "foo.*./"],
    ["single level wildcard", "foo/+/bar", "foo.*.bar"],
    ["single level wildcard", "foo/+/+", "foo.*.*"],
    ["single level wildcard", "foo/+/+/", "foo.*.*./"],
    ["single level wildcard", "foo/+/+/bar", "foo.*.*.bar"],
    ["single level wildcard", "foo//+", "foo./.*"],
    ["single level wildcard", "foo//+/", "foo./.*./"],
    ["single level wildcard", "foo//+//", "foo./.*././"],
    ["single level wildcard", "foo//+//bar", "foo./.*./.bar"],
    ["single level wildcard", "foo///+///bar", "foo././.*././.bar"],
    ["single level wildcard", "foo.bar///+///baz", "foo//bar././.*././.baz"],
    ["multi level wildcard", "#", ">"],
    ["multi level wildcard", "/#", "/.>"],
    ["multi level wildcard", "/foo/#", "/.foo.>"],
    ["multi level wildcard", "foo/#", "foo.>"],
    ["multi level wildcard", "foo//#", "foo./.>"],
    ["multi level wildcard", "foo///#", "foo././.>"],
    ["multi level wildcard", "foo/bar/#", "foo.bar.>"],
    ["multi level wildcard", "foo/bar.baz/#", "foo.bar//baz.>"],
    ["* literal", "foo*/bar", "foo*.bar"],
    ["> literal", "foo>/bar", "foo>.bar"],
  ])("%s: %s -> %s", (_name, filter, subject) => {
    expect(subscriptionOf(filter).subjects[0]).toBe(subject);
  });

  // nats-server subscribes these as NATS wildcards; the spec refuses them.
  it.each([
    ["* wildcard middle", "foo/*/bar"],
    ["* wildcard end", "foo/*/bar/*"],
    ["> wildcard", "foo/>"],
    ["wildcard mix", "foo/*/bar/>"],
  ])("%s: %s is refused (spec: a level of only * or >)", (_name, filter) => {
    const r = filterToSubscription(filter);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toContain("wildcard");
  });

  // nats-server's mqttNeedSubForLevelUp: a subject ending in ".>" also gets its parent.
  it.each([
    ["/#", ["/.>", "/"]],
    ["/foo/#", ["/.foo.>", "/.foo"]],
    ["foo//#", ["foo./.>", "foo./"]],
    ["foo/bar.baz/#", ["foo.bar//baz.>", "foo.bar//baz"]],
  ])("%s subscribes %j", (filter, subjects) => {
    expect(subscriptionOf(filter).subjects).toEqual(subjects);
  });
});

describe("nats-server publish/subscribe error tables", () => {
  // TestMQTTPublishTopicErrors
  it.each([
    ["empty", ""],
    ["with single level wildcard", "foo/+"],
    ["with multiple level wildcard", "foo/#"],
    ["with tab", "foo\tbar"],
    ["with line feed", "foo\nbar"],
    ["with carriage return", "foo\rbar"],
    ["with form feed", "foo\fbar"],
  ])("publish topic %s is refused", (_name, topic) => {
    expect(publishTopicToSubject(topic).ok).toBe(false);
  });

  // TestMQTTSubWithControlChars, TestMQTTParseSub ("empty topic", "topic with null byte")
  it.each([
    ["tab", "foo\tbar"],
    ["line feed", "foo\nbar"],
    ["carriage return", "foo\rbar"],
    ["form feed", "foo\fbar"],
    ["empty", ""],
    ["null byte", "a\x00b"],
  ])("filter with %s is refused", (_name, filter) => {
    expect(filterToSubscription(filter).ok).toBe(false);
  });

  // TestMQTTTopicWithDot
  it("spBv1.0/plant1 <-> spBv1//0.plant1", () => {
    expect(subjectOf("spBv1.0/plant1")).toBe("spBv1//0.plant1");
    expect(subscriptionOf("spBv1.0/plant1").subjects).toEqual(["spBv1//0.plant1"]);
    expect(subjectToTopic("spBv1//0.plant1")).toBe("spBv1.0/plant1");
  });

  // TestMQTTSubjectWildcardStart: "#" gets foo and foo/foo, never $JS.foo.
  it("# gets foo and foo/foo but not $JS/foo", () => {
    const sub = subscriptionOf("#");
    expect(sub.dollarGuard).toBe(true);
    expect(deliverableTo("foo", sub.dollarGuard)).toBe(true);
    expect(deliverableTo("foo/foo", sub.dollarGuard)).toBe(true);
    expect(deliverableTo(subjectToTopic("$JS.foo")!, sub.dollarGuard)).toBe(false);
  });

  // Same test: nats-server takes "*" and "*/foo" as NATS wildcards; the spec refuses them.
  it.each(["*", "*/foo"])("filter %s is refused (nats-server: NATS wildcard)", (filter) => {
    expect(filterToSubscription(filter).ok).toBe(false);
  });
});

describe("filters", () => {
  it.each([
    ["+ inside a level", "plant/a+/temp"],
    ["# inside a level", "plant/a#"],
    ["# not last", "plant/#/temp"],
    ["# then an empty level", "plant/#/"],
    ["vertical tab", "plant\v"],
    ["C1 control", "plant\u0085"],
    ["no-break space", "plant\u00a0line"],
    ["line separator", "plant\u2028"],
    ["lone surrogate", "plant\ud800"],
  ])("refuses %s: %j", (_name, filter) => {
    expect(filterToSubscription(filter).ok).toBe(false);
  });

  it.each([
    ["$share/g1/#", { subjects: [">"], queue: "g1", dollarGuard: true }],
    ["$share/g.1/a/#", { subjects: ["a.>", "a"], queue: "g.1", dollarGuard: false }],
    ["$share/g/$SYS/+", { subjects: ["$SYS.*"], queue: "g", dollarGuard: false }],
    ["$sharex/g/a", { subjects: ["$sharex.g.a"], dollarGuard: false }],
    ["$share", { subjects: ["$share"], dollarGuard: false }],
  ])("%s", (filter, expected) => {
    expect(subscriptionOf(filter)).toEqual(expected);
  });

  it.each([
    ["empty share name", "$share//a"],
    ["no filter", "$share/g1"],
    ["empty filter", "$share/g1/"],
    ["+ in share name", "$share/g+/a"],
    ["# in share name", "$share/#/a"],
    ["space in share name", "$share/g 1/a"],
    ["bad filter", "$share/g1/a/#/b"],
    ["nothing after $share/", "$share/"],
  ])("refuses a malformed shared subscription: %s (%j)", (_name, filter) => {
    expect(filterToSubscription(filter).ok).toBe(false);
  });

  it("refuses a filter longer than 65535 bytes, counting UTF-8", () => {
    expect(filterToSubscription("a".repeat(MAX_TOPIC_BYTES)).ok).toBe(true);
    expect(filterToSubscription("a".repeat(MAX_TOPIC_BYTES + 1)).ok).toBe(false);
    expect(filterToSubscription("é".repeat(32768)).ok).toBe(false);
  });
});

describe("publish topics", () => {
  it("accepts exactly 65535 bytes and refuses more, counting UTF-8", () => {
    expect(publishTopicToSubject("a".repeat(MAX_TOPIC_BYTES)).ok).toBe(true);
    expect(publishTopicToSubject("a".repeat(MAX_TOPIC_BYTES + 1)).ok).toBe(false);
    expect(publishTopicToSubject("€".repeat(21845)).ok).toBe(true);
    expect(publishTopicToSubject(`${"€".repeat(21845)}a`).ok).toBe(false);
    expect(publishTopicToSubject("😀".repeat(16384)).ok).toBe(false);
  });

  it.each([
    ["a*", "a*"],
    ["*a/b", "*a.b"],
    ["a/>b", "a.>b"],
    ["zürich/😀", "zürich.😀"],
    ["$", "$"],
    ["\ufeffbom", "\ufeffbom"],
  ])("%s -> %s (* and > inside a level are literal)", (topic, subject) => {
    expect(subjectOf(topic)).toBe(subject);
  });

  it.each([
    ["DEL", "a\x7f"],
    ["NUL", "a\x00"],
    ["vertical tab", "a\vb"],
    ["C1 control", "a\u009fb"],
    ["ideographic space", "a\u3000b"],
    ["lone low surrogate", "\udc00"],
  ])("refuses %s", (_name, topic) => {
    expect(publishTopicToSubject(topic).ok).toBe(false);
  });
});

describe("subjects back to topics", () => {
  it.each([
    ["stray / inside a token (an AMQP address)", "orders/eu"],
    ["three slashes", "a.///"],
    ["/ before a letter", "a./b"],
    ["empty token", "a..b"],
    ["empty first token", ".a"],
    ["empty last token", "a."],
    ["empty subject", ""],
    ["the empty topic", "/"],
    ["DEL", "a\x7f"],
  ])("%s: %j is not delivered", (_name, subject) => {
    expect(subjectToTopic(subject)).toBeUndefined();
  });
});

describe("topicMatchesFilter (MQTT 5 section 4.7 examples)", () => {
  it.each([
    ["sport/tennis/player1/#", "sport/tennis/player1", true],
    ["sport/tennis/player1/#", "sport/tennis/player1/ranking", true],
    ["sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", true],
    ["sport/#", "sport", true],
    ["sport/tennis/+", "sport/tennis/player1", true],
    ["sport/tennis/+", "sport/tennis/player2", true],
    ["sport/tennis/+", "sport/tennis/player1/ranking", false],
    ["sport/+", "sport", false],
    ["sport/+", "sport/", true],
    ["+/+", "/finance", true],
    ["/+", "/finance", true],
    ["+", "/finance", false],
    ["#", "$SYS/monitor/Clients", false],
    ["+/monitor/Clients", "$SYS/monitor/Clients", false],
    ["$SYS/#", "$SYS/monitor/Clients", true],
    ["$SYS/monitor/+", "$SYS/monitor/Clients", true],
    ["sport/tennis", "sport/tennis", true],
    ["sport/tennis", "sport/Tennis", false],
    ["sport/tennis", "sport/tennis/", false],
    ["$share/g/sport/+", "sport/tennis", true],
    ["$share/g/#", "$SYS/x", false],
    ["sport/*", "sport/*", false], // the filter is refused
    ["sport/+", "sport/*", true], // a NATS client published sport.*
    ["sport/#/x", "sport/a/x", false], // the filter is refused
    ["sport/+", "sport/+", false], // no topic holds +
  ])("%s vs %s -> %s", (filter, topic, expected) => {
    expect(topicMatchesFilter(topic, filter)).toBe(expected);
  });
});

// ---- properties ----------------------------------------------------------

/** Strings over a small alphabet with every special character, so edge cases come up often. */
const tricky = fc.string({
  unit: fc.constantFrom(..."ab//.+#*>$ \t\x7f\x00\vé\u00a0\u2028😀%", "\ud800"),
  maxLength: 10,
});

const hasRefusedChar = (s: string): boolean =>
  /\p{Cs}/u.test(s) || [...s].some((ch) => isWhitespaceOrControl(ch.codePointAt(0)!));

/** The rules for a publish topic, stated as plainly as possible. */
function topicIsValid(t: string): boolean {
  return (
    t !== "" &&
    !/[+#]/.test(t) &&
    !hasRefusedChar(t) &&
    !t.split("/").some((l) => l === "*" || l === ">") &&
    utf8Length(t) <= MAX_TOPIC_BYTES
  );
}

/** The rules for a (non-shared) filter. */
function filterIsValid(f: string): boolean {
  if (f === "" || hasRefusedChar(f)) return false;
  const levels = f.split("/");
  return levels.every(
    (l, i) =>
      l !== "*" && l !== ">" && (l === "+" || l === "#" || !/[+#]/.test(l)) && (l !== "#" || i === levels.length - 1),
  );
}

/** The mapping rule of the spec table, written independently of the implementation. */
const expectedSubject = (levels: string): string =>
  levels
    .split("/")
    .map((l) => (l === "" ? "/" : l === "+" ? "*" : l === "#" ? ">" : l.split(".").join("//")))
    .join(".");

/** NATS subject matching: `*` is one token, `>` one or more. */
function natsMatches(sub: string, subject: string): boolean {
  const s = sub.split(".");
  const t = subject.split(".");
  for (let i = 0; i < s.length; i++) {
    if (s[i] === ">") return t.length > i;
    if (i >= t.length || (s[i] !== "*" && s[i] !== t[i])) return false;
  }
  return s.length === t.length;
}

const validTopic = fc
  .string({ unit: fc.constantFrom("a", "b", "/", ".", "$", "*", ">", "x*", "é", "😀"), minLength: 1, maxLength: 12 })
  .filter(topicIsValid);

describe("properties", () => {
  it("publish topics are refused exactly when the rules say so", () => {
    fc.assert(
      fc.property(tricky, (t) => {
        const r = publishTopicToSubject(t);
        expect(r.ok).toBe(topicIsValid(t));
        if (r.ok) expect(r.value).toBe(expectedSubject(t));
      }),
      RUNS,
    );
  });

  it("filters are refused exactly when the rules say so", () => {
    fc.assert(
      fc.property(tricky, (f) => {
        const r = filterToSubscription(f);
        expect(r.ok).toBe(filterIsValid(f));
        if (r.ok && !f.startsWith("$share/")) expect(r.value.subjects[0]).toBe(expectedSubject(f));
      }),
      RUNS,
    );
  });

  it("every valid publish topic survives topic -> subject -> topic", () => {
    fc.assert(
      fc.property(validTopic, (t) => {
        expect(subjectToTopic(subjectOf(t))).toBe(t);
      }),
      RUNS,
    );
  });

  it("every valid topic from any characters survives the round trip", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", minLength: 1, maxLength: 20 }).filter(topicIsValid), (t) => {
        expect(subjectToTopic(subjectOf(t))).toBe(t);
      }),
      RUNS,
    );
  });

  it("subjects made from topics and filters have no whitespace and no empty tokens", () => {
    fc.assert(
      fc.property(tricky, (text) => {
        const pub = publishTopicToSubject(text);
        const sub = filterToSubscription(text);
        const subjects = [...(pub.ok ? [pub.value] : []), ...(sub.ok ? sub.value.subjects : [])];
        for (const s of subjects) {
          expect(hasRefusedChar(s)).toBe(false);
          expect(s.split(".").includes("")).toBe(false);
        }
        // A publish subject never holds a NATS wildcard token.
        if (pub.ok) expect(pub.value.split(".").some((tok) => tok === "*" || tok === ">")).toBe(false);
      }),
      RUNS,
    );
  });

  it("a subject gives a topic only when that topic maps back to it", () => {
    const subject = fc.string({ unit: fc.constantFrom("a", "/", "/", ".", "+", "#", "$", "\x7f"), maxLength: 10 });
    fc.assert(
      fc.property(subject, (s) => {
        const t = subjectToTopic(s);
        if (t !== undefined) expect(publishTopicToSubject(t)).toEqual({ ok: true, value: s });
        if (/[+#]/.test(s)) expect(t).toBeUndefined();
      }),
      RUNS,
    );
  });

  it("MQTT filter matching agrees with NATS matching on the mapped subjects", () => {
    const level = fc.constantFrom("a", "b", "", "$", "a.b");
    const topic = fc.array(level, { minLength: 1, maxLength: 4 }).map((ls) => ls.join("/"));
    const filter = fc
      .array(fc.constantFrom("a", "b", "", "$", "a.b", "+", "+", "#"), { minLength: 1, maxLength: 4 })
      .map((ls) => ls.join("/"));
    fc.assert(
      fc.property(topic, filter, fc.boolean(), (t, f, shared) => {
        fc.pre(topicIsValid(t) && filterIsValid(f));
        const sub = subscriptionOf(shared ? `$share/g/${f}` : f);
        const subject = subjectOf(t);
        const nats = sub.subjects.some((s) => natsMatches(s, subject)) && deliverableTo(t, sub.dollarGuard);
        expect(topicMatchesFilter(t, shared ? `$share/g/${f}` : f)).toBe(nats);
      }),
      { numRuns: 5000 },
    );
  });

  it("the $ guard is set exactly for filters that start with a wildcard", () => {
    fc.assert(
      fc.property(tricky.filter(filterIsValid), (f) => {
        expect(subscriptionOf(f).dollarGuard).toBe(f[0] === "+" || f[0] === "#");
      }),
      RUNS,
    );
  });

  it("a refused filter matches nothing", () => {
    fc.assert(
      fc.property(tricky, tricky, (t, f) => {
        if (!filterToSubscription(f).ok) expect(topicMatchesFilter(t, f)).toBe(false);
      }),
      RUNS,
    );
  });
});
