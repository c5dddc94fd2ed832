// The server-to-client topic alias policy (docs/decisions/topic-aliases.md), as properties:
// the client always resolves the topic that was meant, and a fleet cycling through more
// topics than the client allows aliases costs no more bytes than no aliases at all.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MIN_ALIASED_TOPIC_BYTES, OutboundTopicAliases } from "../../src/protocol/topicAliasesOut.js";

const topicOf = (i: number) => `fleet/vehicle-${String(i).padStart(4, "0")}`;

/** Sends `order` through the policy; returns the bytes each send's topic cost on the wire (topic field plus alias property) and what the client resolved. */
function send(max: number, order: readonly number[]) {
  const aliases = new OutboundTopicAliases(max);
  const client = new Map<number, string>();
  let bytes = 0;
  let plainBytes = 0;
  const resolved: string[] = [];
  for (const i of order) {
    const topic = topicOf(i);
    plainBytes += 2 + topic.length;
    const plan = aliases.plan(topic, topic.length);
    if (!plan) {
      bytes += 2 + topic.length;
      resolved.push(topic);
      continue;
    }
    expect(plan.alias).toBeGreaterThanOrEqual(1);
    expect(plan.alias).toBeLessThanOrEqual(max);
    if (!plan.known) client.set(plan.alias, topic);
    bytes += 2 + (plan.known ? 0 : topic.length) + 3;
    resolved.push(client.get(plan.alias)!);
    aliases.commit(topic, plan);
    expect(aliases.size()).toBeLessThanOrEqual(max);
  }
  return { bytes, plainBytes, resolved };
}

describe("OutboundTopicAliases", () => {
  it("the client resolves every send to its own topic, with aliases 1..max only", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.array(fc.integer({ min: 0, max: 12 }), { maxLength: 200 }),
        (max, order) => {
          expect(send(max, order).resolved).toEqual(order.map(topicOf));
        },
      ),
    );
  });

  it("a fleet cycling through more topics than aliases costs no more than no aliases, once the first bindings are paid back", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 30 }),
        fc.integer({ min: 1, max: 6 }),
        (max, extra, rounds) => {
          const fleet = max + extra;
          const order = Array.from({ length: fleet * rounds }, (_, k) => k % fleet);
          const { bytes, plainBytes } = send(max, order);
          // At most the first bindings (3 bytes each), paid back from the second round on:
          // never a rebinding per send.
          expect(bytes).toBeLessThanOrEqual(plainBytes + (rounds === 1 ? 3 * max : 0));
        },
      ),
    );
  });

  it("a hot set no larger than the table is aliased after each topic's first send", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.nat(), { minLength: 1, maxLength: 100 }),
        (max, picks) => {
          const order = picks.map((p) => p % max);
          const { bytes } = send(max, order);
          const first = new Set(order).size;
          expect(bytes).toBe(first * (2 + topicOf(0).length + 3) + (order.length - first) * 5);
        },
      ),
    );
  });

  it("topics under 6 bytes get none", () => {
    const aliases = new OutboundTopicAliases(10);
    expect(MIN_ALIASED_TOPIC_BYTES).toBe(6);
    expect(aliases.plan("a/bcd", 5)).toBeUndefined();
    expect(aliases.plan("a/bcde", 6)).toEqual({ alias: 1, known: false });
  });
});
