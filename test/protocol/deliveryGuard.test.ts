import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  clientInboxPrefix,
  coreDeliverable,
  gatewayInboxPrefix,
  isGatewayOwn,
  storedDeliverable,
} from "../../src/protocol/deliveryGuard.js";
import { subjectMatches } from "../../src/protocol/subjects.js";

const RUNS = { numRuns: 5000 };

/** NATS matching by the book: `*` one token, `>` one or more trailing tokens. */
function reference(pattern: string, subject: string): boolean {
  const p = pattern.split(".");
  const s = subject.split(".");
  for (let i = 0; i < p.length; i++) {
    if (p[i] === ">") return s.length > i;
    if (i >= s.length) return false;
    if (p[i] !== "*" && p[i] !== s[i]) return false;
  }
  return p.length === s.length;
}

const token = fc.constantFrom("a", "b", "ab", "*", ">", "", "$MQG", "_INBOX", "MQGW", "inbox");
const dotted = fc.array(token, { minLength: 1, maxLength: 6 }).map((t) => t.join("."));
const literal = fc
  .array(fc.constantFrom("a", "b", "ab", "x1", "$JS", "dev", "_INBOX"), { minLength: 1, maxLength: 6 })
  .map((t) => t.join("."));
const gatewayId = fc.stringMatching(/^[0-9a-f]{1,16}$/);
const nuid = fc.stringMatching(/^[A-Za-z0-9]{1,22}$/);

describe("subjectMatches", () => {
  it("agrees with token-by-token matching for any pattern and subject (empty tokens included)", () => {
    fc.assert(
      fc.property(dotted, dotted, (p, s) => subjectMatches(p, s) === reference(p, s)),
      RUNS,
    );
  });
  it("a literal subject matches itself, `>` matches everything, `*` one token", () => {
    fc.assert(
      fc.property(
        literal,
        (s) => subjectMatches(s, s) && subjectMatches(">", s) && subjectMatches("*", s) === !s.includes("."),
      ),
      RUNS,
    );
  });
});

describe("the delivery guard", () => {
  it("never delivers the gateway's own subjects, whatever the client subscribed to", () => {
    fc.assert(
      fc.property(
        gatewayId,
        nuid,
        fc.array(nuid, { maxLength: 3 }),
        fc.constantFrom(">", "$MQG.>", "_INBOX.>", "*.*.*.*", "$MQG.inbox.>"),
        (id, n, rest, pattern) => {
          for (const prefix of [gatewayInboxPrefix(id), clientInboxPrefix(id), "$MQG.retained", "$MQG.alive", "$MQG"]) {
            const subject = [prefix, n, ...rest].join(".");
            expect(isGatewayOwn(subject)).toBe(true);
            expect(coreDeliverable(pattern, subject, undefined)).toBe(false);
            expect(storedDeliverable([pattern], subject)).toBe(false);
          }
        },
      ),
      RUNS,
    );
  });

  it("never delivers a JetStream delivery (reply $JS.ACK.>) that reached a core subscription", () => {
    fc.assert(
      fc.property(literal, fc.array(nuid, { minLength: 1, maxLength: 9 }), (subject, ack) => {
        expect(coreDeliverable(">", subject, `$JS.ACK.${ack.join(".")}`)).toBe(false);
        expect(coreDeliverable(subject, subject, `$JS.ACK.${ack.join(".")}`)).toBe(false);
      }),
      RUNS,
    );
  });

  it("otherwise delivers exactly what the subscription's pattern matches", () => {
    fc.assert(
      fc.property(dotted, literal, fc.option(literal, { nil: undefined }), (pattern, subject, reply) => {
        const own = isGatewayOwn(subject) || (reply?.startsWith("$JS.ACK.") ?? false);
        expect(coreDeliverable(pattern, subject, reply)).toBe(!own && reference(pattern, subject));
      }),
      RUNS,
    );
  });

  it("a stored or retained message goes out only on a subject one of the subscription's subjects matches", () => {
    fc.assert(
      fc.property(fc.array(dotted, { minLength: 1, maxLength: 3 }), literal, (patterns, subject) => {
        expect(storedDeliverable(patterns, subject)).toBe(
          !isGatewayOwn(subject) && patterns.some((p) => reference(p, subject)),
        );
      }),
      RUNS,
    );
  });

  it("an AMQP dynamic source (_INBOX.<nuid>) and a client's own _INBOX subscription still get their replies", () => {
    fc.assert(
      fc.property(
        nuid,
        (n) =>
          coreDeliverable(`_INBOX.${n}`, `_INBOX.${n}`, undefined) &&
          coreDeliverable("_INBOX.>", `_INBOX.${n}.1`, "reply.x"),
      ),
      RUNS,
    );
    // `$MQGW...` and `_INBOX.MQGWx` are ordinary subjects (only whole tokens are the gateway's).
    expect(coreDeliverable(">", "$MQGW.admin.x", undefined)).toBe(true);
    expect(coreDeliverable(">", "_INBOX.MQGWx.y", undefined)).toBe(true);
  });
});
