// A bare MQTT publish's header block, made once per client (issue 16): the mapping hands
// back the client's own array, and the MsgHdrs made of it once encode to the bytes the
// per-message path writes.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fixedNatsHeaders, HeaderCache } from "../../src/actors/client/headerCache.js";
import { toNatsHeaders } from "../../src/actors/client/natsHeaders.js";
import { bareHeaders, mqttPublishToNats, type PublishContext } from "../../src/protocol/mqttToNats.js";

const encoded = (h: unknown) => (h as { encode(): Uint8Array }).encode();

const ctxFor = (clientId: string, version: 4 | 5): PublishContext => ({
  protocolVersion: version,
  clientId,
  routes: new Map(),
  routeList: [],
  now: 1_700_000_000_000,
  markClientId: true,
});

const topic = fc.stringMatching(/^[a-z0-9/]{1,20}$/).filter((t) => !t.startsWith("$"));
const publish = fc.record({
  topic,
  payload: fc.uint8Array({ maxLength: 8 }).map((b) => Buffer.from(b)),
  qos: fc.constantFrom(0, 1, 2) as fc.Arbitrary<0 | 1 | 2>,
  retain: fc.boolean(),
  properties: fc.option(fc.record({ contentType: fc.string({ maxLength: 6 }) }), { nil: undefined }),
});

describe("a bare publish's headers, encoded once", () => {
  it("the mapping gives the same result with the client's bare headers as without, and that very array for a bare publish", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "grapheme", maxLength: 12 }),
        fc.constantFrom(4, 5) as fc.Arbitrary<4 | 5>,
        publish,
        (clientId, version, p) => {
          const plain = mqttPublishToNats(p, ctxFor(clientId, version));
          const bare = bareHeaders(clientId);
          const cached = mqttPublishToNats(p, { ...ctxFor(clientId, version), bareHeaders: bare });
          expect(cached).toEqual(plain);
          const isBare = p.qos === 0 && !p.retain && (version === 4 || p.properties === undefined);
          expect(cached.ok && cached.value.headers === bare).toBe(isBare);
        },
      ),
    );
  });

  it("encodes to the bytes nats.js writes for the same pairs, every time", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 16 }), (clientId) => {
        const pairs = bareHeaders(clientId);
        const fixed = fixedNatsHeaders(pairs);
        const fresh = encoded(toNatsHeaders(pairs));
        expect(Buffer.from(encoded(fixed)).equals(Buffer.from(fresh))).toBe(true);
        expect(encoded(fixed)).toBe(encoded(fixed));
        expect(fixed.get("Mqgw-Mqtt-Client-Id")).toBe(pairs[0]![1]);
      }),
    );
  });
});

describe("the last headers a publisher sent, encoded once (both doors' HeaderCache)", () => {
  const pair = fc.tuple(fc.constantFrom("Mqgw-QoS", "Mqgw-Amqp-Container-Id", "x-k"), fc.constantFrom("1", "2", "c"));
  it("gives the bytes nats.js writes for the pairs asked, and the same object while the pairs stay the same", () => {
    fc.assert(
      fc.property(fc.array(fc.array(pair, { maxLength: 3 }), { minLength: 1, maxLength: 8 }), (sends) => {
        const cache = new HeaderCache();
        let last: { pairs: Array<[string, string]>; h: unknown } | undefined;
        for (const pairs of sends) {
          // A copy: equal pairs in a new array are the same headers.
          const h = cache.headersOf(pairs.map(([k, v]) => [k, v] as [string, string]));
          expect(Buffer.from(encoded(h)).equals(Buffer.from(encoded(toNatsHeaders(pairs))))).toBe(true);
          if (last && JSON.stringify(last.pairs) === JSON.stringify(pairs)) expect(h).toBe(last.h);
          else if (last) expect(h).not.toBe(last.h);
          last = { pairs, h };
        }
      }),
    );
  });
});
