import { MsgHdrsImpl } from "@nats-io/transport-node";
import fc from "fast-check";
import mqtt, { type IConnectPacket, type IPublishPacket } from "mqtt-packet";
import { describe, expect, it } from "vitest";
import { HEADER } from "../../src/protocol/headers.js";
import { encodePublishFast, parsePublishFast, publishLength } from "../../src/protocol/mqttFastPath.js";
import { type PublishProperties, publishPropertiesLength } from "../../src/protocol/mqttProperties.js";
import { mqttPublishToNats } from "../../src/protocol/mqttToNats.js";
import { natsToMqttPublish } from "../../src/protocol/natsToMqtt.js";
import { parsePacket } from "../../src/vendor/mqttPacket.js";

const RUNS = { numRuns: 500 };

/** Keys that mqtt-packet's object form loses the order of: repeats, and integer-like keys (JS puts them first). */
const key = fc.oneof(
  fc.constantFrom("a", "b", "1", "10", "2", "zone", "with space", "%", ",", ":", "é", ""),
  fc.string({ unit: "grapheme", maxLength: 6 }),
);
const value = fc.oneof(fc.constantFrom("", " x ", "1", "100%"), fc.string({ unit: "grapheme", maxLength: 10 }));
const userProps = fc.array(fc.tuple(key, value), { minLength: 1, maxLength: 8 });

const propsArb: fc.Arbitrary<PublishProperties> = fc.record(
  {
    payloadFormatIndicator: fc.boolean(),
    messageExpiryInterval: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
    topicAlias: fc.integer({ min: 1, max: 65535 }),
    responseTopic: fc.string({ unit: "grapheme", minLength: 1, maxLength: 20 }),
    correlationData: fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b)),
    userProperties: userProps,
    contentType: fc.string({ unit: "grapheme", maxLength: 20 }),
  },
  { requiredKeys: [] },
);

/** mqtt-packet's grouped form of a list of pairs. */
function grouped(pairs: Array<[string, string]>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of pairs) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

function viaLibrary(bytes: Buffer, version: 4 | 5): IPublishPacket {
  const p = mqtt.parser({ protocolVersion: version });
  let out: IPublishPacket | undefined;
  p.on("packet", (x) => (out = x as IPublishPacket));
  p.on("error", (e) => {
    throw e;
  });
  p.parse(bytes);
  return out!;
}

describe("PUBLISH properties in wire order", () => {
  it("mqtt-packet reads what the gateway writes, field for field (User Properties grouped as it groups them)", () => {
    fc.assert(
      fc.property(propsArb, fc.uint8Array({ maxLength: 50 }), (props, payload) => {
        // mqtt-packet overwrites a repeated key whose first value is "" (it tests the value's truthiness).
        fc.pre(!props.userProperties?.some(([, v]) => v === ""));
        const bytes = encodePublishFast(5, "t/1", payload, 1, false, false, 9, props);
        expect(bytes.length).toBe(publishLength(5, 3, payload.length, 1, publishPropertiesLength(props)));
        const lib = viaLibrary(bytes, 5);
        const { userProperties, correlationData, ...rest } = props;
        expect(lib.properties ?? {}).toEqual({
          ...rest,
          ...(correlationData ? { correlationData: Buffer.from(correlationData) } : {}),
          ...(userProperties ? { userProperties: grouped(userProperties) } : {}),
        });
        expect(Buffer.from(lib.payload as Buffer).equals(Buffer.from(payload))).toBe(true);
      }),
      RUNS,
    );
  });

  it("the fast path reads back exactly what was written, User Properties in order and repeated", () => {
    fc.assert(
      fc.property(
        propsArb,
        fc.uint8Array({ maxLength: 50 }),
        fc.constantFrom(0 as const, 1 as const, 2 as const),
        (props, payload, qos) => {
          const bytes = encodePublishFast(5, "plant/line1", payload, qos, false, false, qos > 0 ? 7 : undefined, props);
          const got = parsePublishFast(bytes, 5)!;
          expect(got.properties ?? {}).toEqual(props);
          expect(Buffer.from(got.payload).equals(Buffer.from(payload))).toBe(true);
        },
      ),
      RUNS,
    );
  });

  it("mqtt-packet's own parse (a topic the fast path leaves to it) gets the User Properties back in wire order", () => {
    fc.assert(
      fc.property(userProps, (pairs) => {
        const bytes = encodePublishFast(5, "usine/été", Buffer.from("x"), 1, false, false, 3, {
          userProperties: pairs,
        });
        expect(parsePublishFast(bytes, 5)).toBeUndefined();
        const p = parsePacket(bytes, { protocolVersion: 5 }) as IPublishPacket;
        expect(p.topic).toBe("usine/été");
        expect(p.properties?.userProperties).toEqual(pairs);
      }),
      RUNS,
    );
  });

  it("a CONNECT's will keeps its User Properties in wire order", () => {
    const connect: IConnectPacket = {
      cmd: "connect",
      protocolId: "MQTT",
      protocolVersion: 5,
      clientId: "c1",
      clean: true,
      keepalive: 30,
      properties: { sessionExpiryInterval: 10, userProperties: { conn: "x" } },
      will: {
        topic: "w",
        payload: Buffer.from("bye"),
        qos: 1,
        retain: false,
        properties: { willDelayInterval: 0, userProperties: { b: "1", a: ["2", "3"] } },
      },
    };
    const bytes = mqtt.generate(connect, { protocolVersion: 5 });
    const p = parsePacket(bytes, { protocolVersion: 5 }) as IConnectPacket;
    expect(p.will?.properties?.userProperties).toEqual([
      ["b", "1"],
      ["a", "2"],
      ["a", "3"],
    ]);
    expect(p.properties?.userProperties).toEqual({ conn: "x" });
  });
});

/** Through nats.js: the wire form, then MsgHdrs as a subscriber gets it (values grouped by key). */
function viaNats(pairs: Array<[string, string]>): MsgHdrsImpl {
  const h = new MsgHdrsImpl();
  for (const [k, v] of pairs) h.append(k, v);
  return MsgHdrsImpl.decode(h.encode());
}

/** A hop that keeps each key's values in order but not the keys' order (a Go map: nats.go's Header). */
function shuffleKeys(pairs: Array<[string, string]>, seed: number): Array<[string, string]> {
  const byKey = new Map<string, Array<[string, string]>>();
  for (const h of pairs) byKey.set(h[0], [...(byKey.get(h[0]) ?? []), h]);
  return [...byKey.values()]
    .map((g, i) => ({ g, r: (Math.imul(i + 1, seed) >>> 0) % 97 }))
    .sort((x, y) => x.r - y.r)
    .flatMap(({ g }) => g);
}

const ctx = { protocolVersion: 5 as const, clientId: "pub", routes: new Map(), routeList: [], now: 0 };
const sub = { qos: 1 as const, noLocal: false, retainAsPublished: false, dollarGuard: false };

describe("MQTT -> NATS -> MQTT keeps User Property order and repeats (the header table)", () => {
  it("through nats.js headers and a hop that reorders keys", () => {
    fc.assert(
      fc.property(userProps, fc.integer(), fc.boolean(), (pairs, seed, goHop) => {
        const wire = encodePublishFast(5, "plant/line1/temp", Buffer.from("21.5"), 1, false, false, 1, {
          userProperties: pairs,
        });
        const inbound = parsePublishFast(wire, 5)!;
        const mapped = mqttPublishToNats({ ...inbound, properties: inbound.properties }, ctx);
        if (!mapped.ok) throw new Error(mapped.error.reason);
        const headers = mapped.value.headers!;
        if (new Set(pairs.map(([k]) => k)).size > 1) expect(headers.map(([k]) => k)).toContain(HEADER.mqttPropsOrder);
        // MsgHdrs iterates as [key, values]: what a NATS subscriber hands on.
        const received = goHop
          ? shuffleKeys(headers, seed)
          : (viaNats(headers) as unknown as Iterable<[string, string]>);
        const out = natsToMqttPublish(mapped.value.subject, received, inbound.payload, undefined, sub, {
          protocolVersion: 5,
          clientId: "sub",
          now: 0,
        });
        if (typeof out === "string") throw new Error(out);
        const back = encodePublishFast(5, out.topic, out.payload, out.qos, out.retain, false, 1, out.properties);
        expect(parsePublishFast(back, 5)!.properties?.userProperties).toEqual(pairs);
      }),
      RUNS,
    );
  });
});
