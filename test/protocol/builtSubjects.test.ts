// Issue 13, finding 2: every subject the gateway builds passes the checks a literal one
// does before anything is sent: not the gateway's own, no wildcard or empty token, a
// protocol line NATS takes. Properties over route templates and user properties ($ included).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isGatewayOwn } from "../../src/protocol/deliveryGuard.js";
import { Reason } from "../../src/protocol/mqttReasons.js";
import { mqttPublishToNats, type PublishContext, type Route } from "../../src/protocol/mqttToNats.js";
import { lineLimits, publishSubjectProblem, tooLong } from "../../src/protocol/natsLimits.js";
import { parseTemplate } from "../../src/protocol/route.js";
import { publishTopicToSubject, utf8Length } from "../../src/protocol/topic.js";

const RUNS = { numRuns: 3000 };

function route(subject: string, template: string): Route {
  const t = parseTemplate(template);
  if (!t.ok) throw new Error(t.error);
  return { subject, template: t.value };
}

const routes = [route("r", "{a}.{b}.{c}"), route("inbox", "_INBOX.{a}.{b}"), route("orders", "orders.{a}")];
const ctx = (maxSubjectBytes = 0, list = routes): PublishContext => ({
  protocolVersion: 5,
  clientId: "c",
  routes: new Map(list.map((r) => [r.subject, r])),
  routeList: list,
  now: 0,
  maxSubjectBytes,
});

const prop = fc.oneof(
  fc.constantFrom("$MQG", "alive", "retained", "gw1", "MQGW", "$JS", "API", "$SYS", "_INBOX", "*", ">", "", "$"),
  fc.string({ maxLength: 10 }),
  fc.string({ unit: fc.constantFrom(..."$MQG.*> a"), maxLength: 8 }),
);

describe("routed subjects", () => {
  it("a routed publish never reaches the gateway's own subjects or a wildcard: refused 0x87 or a literal subject", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("r", "inbox", "orders"),
        prop,
        prop,
        prop,
        fc.integer({ min: 0, max: 2 }),
        (to, a, b, c, qos) => {
          const out = mqttPublishToNats(
            {
              topic: to,
              payload: Buffer.from("x"),
              qos: qos as 0 | 1 | 2,
              retain: false,
              properties: { userProperties: { a, b, c } },
            },
            ctx(),
          );
          if (!out.ok) {
            expect([Reason.notAuthorized, Reason.topicNameInvalid]).toContain(out.error.reasonCode);
            // Refused only when the values spell the gateway's client inboxes (_INBOX.MQGW.>).
            if (out.error.reasonCode === Reason.notAuthorized)
              expect(to === "inbox" ? a : `${a}.${b}`).toMatch(/^(MQGW|_INBOX\.MQGW)$/);
            return;
          }
          expect(isGatewayOwn(out.value.subject)).toBe(false);
          expect(out.value.subject.startsWith("$")).toBe(false);
          expect(publishSubjectProblem(out.value.subject, out.value.reply, 0, true)).toBeUndefined();
        },
      ),
      RUNS,
    );
  });

  it("the finding's exploit: {a}.{b}.{c} with a=$MQG, b=alive makes the harmless %24MQG.alive.gw1", () => {
    const out = mqttPublishToNats(
      {
        topic: "r",
        payload: Buffer.from("{}"),
        qos: 1,
        retain: false,
        properties: { userProperties: { a: "$MQG", b: "alive", c: "gw1" } },
      },
      ctx(),
    );
    expect(out).toMatchObject({ ok: true, value: { subject: "%24MQG.alive.gw1" } });
    const inbox = mqttPublishToNats(
      {
        topic: "inbox",
        payload: Buffer.from("{}"),
        qos: 1,
        retain: false,
        properties: { userProperties: { a: "MQGW", b: "gw1" } },
      },
      ctx(),
    );
    expect(inbox).toMatchObject({ ok: false, error: { reasonCode: Reason.notAuthorized } });
  });

  it("a response topic in the gateway's namespace is refused 0x87", () => {
    for (const responseTopic of ["$MQG/alive/gw1", "_INBOX/MQGW/gw1/x"]) {
      const out = mqttPublishToNats(
        { topic: "a", payload: Buffer.from(""), qos: 1, retain: false, properties: { responseTopic } },
        ctx(),
      );
      expect(out).toMatchObject({ ok: false, error: { reasonCode: Reason.notAuthorized } });
    }
  });

  it("subject plus reply longer than the limit is refused 0x90, before anything is sent", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom("a", "é", "😀", "/"), minLength: 1, maxLength: 300 }),
        fc.integer({ min: 40, max: 400 }),
        (topic, max) => {
          const out = mqttPublishToNats(
            {
              topic: `t${topic}`,
              payload: Buffer.from(""),
              qos: 0,
              retain: false,
              properties: { responseTopic: "re/ply" },
            },
            ctx(max, []),
          );
          if (!out.ok) {
            expect(out.error.reasonCode).toBe(Reason.topicNameInvalid);
            // The subject the topic maps to (an empty level is a `/` token) is what NATS reads.
            const subject = publishTopicToSubject(`t${topic}`);
            expect(subject.ok && utf8Length(subject.value) + "re.ply".length).toBeGreaterThan(max);
            return;
          }
          expect(utf8Length(out.value.subject) + utf8Length(out.value.reply ?? "")).toBeLessThanOrEqual(max);
        },
      ),
      RUNS,
    );
  });
});

describe("line limits", () => {
  it("tooLong counts UTF-8 bytes exactly", () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 50 }),
        fc.option(fc.string({ maxLength: 50 }), { nil: undefined }),
        fc.integer({ min: 1, max: 200 }),
        (a, b, max) => {
          expect(tooLong(a, b, max)).toBe(utf8Length(a) + (b === undefined ? 0 : utf8Length(b)) > max);
        },
      ),
      RUNS,
    );
  });

  it("with the longest subject, reply and client id allowed, every line the gateway writes fits max_control_line", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1024, max: 65536 }),
        fc.stringMatching(/^[0-9a-zA-Z_-]{1,64}$/),
        fc.stringMatching(/^[A-Z_]{1,32}$/),
        (mcl, id, bucket) => {
          const { subjectBytes, clientIdBytes } = lineLimits(mcl, id, bucket);
          const inboxReply = `_INBOX.MQGW.${id}.${"N".repeat(22)}.${"9".repeat(10)}`;
          const gwReply = `$MQG.inbox.${id}.${"N".repeat(22)}.${"9".repeat(10)}`;
          const hpub = (subject: number, reply: string) =>
            `HPUB ${"s".repeat(subject)} ${reply} 4294967295 4294967295\r\n`.length;
          // A client publish with a response topic as long as what is left.
          expect(hpub(subjectBytes - 10, "r".repeat(10))).toBeLessThanOrEqual(mcl);
          // A stored publish: the subject and the stored publisher's ack inbox.
          expect(hpub(subjectBytes, inboxReply)).toBeLessThanOrEqual(mcl);
          // A retained write by the gateway user.
          expect(hpub(subjectBytes + "$MQG.retained.".length, gwReply)).toBeLessThanOrEqual(mcl);
          // An AMQP durable's consumer create, with a 64-character stream name.
          const create = `$JS.API.CONSUMER.CREATE.${"S".repeat(64)}.mqgw-amqp-${"h".repeat(24)}.`;
          expect(`PUB ${create}${"s".repeat(subjectBytes)} ${inboxReply} 4294967295\r\n`.length).toBeLessThanOrEqual(
            mcl,
          );
          // A session read: direct get of the client id's key (base64url, a third longer).
          const key = Math.ceil((clientIdBytes * 4) / 3);
          expect(
            `PUB $JS.API.DIRECT.GET.KV_${bucket}.$KV.${bucket}.${"k".repeat(key)} ${gwReply} 4294967295\r\n`.length,
          ).toBeLessThanOrEqual(mcl);
          expect(subjectBytes).toBeGreaterThan(mcl / 2);
        },
      ),
      RUNS,
    );
  });
});
