// LastMeta remembers the metadata of the last header pairs (issue 16): whatever the order
// of repeats, strictness and new pairs, it answers what reading them afresh answers.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { headersToMeta, LastMeta } from "../../src/protocol/headers.js";
import { natsToMqttPublish } from "../../src/protocol/natsToMqtt.js";

/** A few pair arrays, each handed again and again as a subscription's reader hands them. */
const pool: Array<Array<[string, string]>> = [
  [["Mqgw-Mqtt-Client-Id", "a"]],
  [["Mqgw-Mqtt-Client-Id", "b"]],
  [
    ["Mqgw-QoS", "1"],
    ["Mqgw-Mqtt-Client-Id", "a"],
    ["Mqgw-Expires", "1700000005000"],
  ],
  [
    ["Mqgw-Prop-k", "%FF"],
    ["Mqgw-Content-Type", "caf%C3%A9"],
    ["Mqgw-Correlation-Id", "r%00"],
  ],
];

describe("LastMeta", () => {
  it("answers headersToMeta's answer for every call", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: pool.length - 1 }), fc.boolean()), { maxLength: 30 }),
        (calls) => {
          const last = new LastMeta();
          for (const [i, strict] of calls) expect(last.read(pool[i]!, strict)).toEqual(headersToMeta(pool[i]!, strict));
        },
      ),
    );
  });

  it("gives natsToMqttPublish what it gives without it, one receiver after another", () => {
    const sub = { qos: 1 as const, noLocal: true, retainAsPublished: true, dollarGuard: false };
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.integer({ min: 0, max: pool.length - 1 }),
            fc.constantFrom(4, 5) as fc.Arbitrary<4 | 5>,
            fc.constantFrom("a", "b"),
          ),
          { maxLength: 20 },
        ),
        (calls) => {
          const last = new LastMeta();
          for (const [i, version, clientId] of calls) {
            const rx = { protocolVersion: version, clientId, now: 1_700_000_000_000 };
            const payload = new Uint8Array([1]);
            expect(natsToMqttPublish("t.x", pool[i], payload, undefined, sub, rx, false, last.read)).toEqual(
              natsToMqttPublish("t.x", pool[i], payload, undefined, sub, rx),
            );
          }
        },
      ),
    );
  });
});
