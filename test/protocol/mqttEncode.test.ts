// Issue 13, finding 3: a PUBLISH the gateway writes always has a length that matches its
// bytes, whatever headers the NATS message carried. Header maps are arbitrary (values
// over 65,535 bytes, escapes that are not UTF-8, U+0000, any key); the delivery is mapped
// as the session maps it and encoded as the connection encodes it, then read back with
// mqtt-packet's parser (what mqtt.js uses). Other packets go through mqtt-packet's own
// encoder, wrapped so that what it cannot write whole is never written (mqttEncode.ts).
import fc from "fast-check";
import mqtt, { type IPublishPacket, type Packet } from "mqtt-packet";
import { describe, expect, it } from "vitest";
import { encodeMqttPacket, wholePacket } from "../../src/protocol/mqttEncode.js";
import { encodePublishFast } from "../../src/protocol/mqttFastPath.js";
import { mqttString, natsToMqttPublish, type SubscriptionOptions } from "../../src/protocol/natsToMqtt.js";

const sub: SubscriptionOptions = {
  qos: 1,
  noLocal: false,
  retainAsPublished: false,
  subscriptionId: 7,
  dollarGuard: false,
};
const rx = { protocolVersion: 5 as const, clientId: "rx", now: 0 };

const big = (n: number) => fc.constant("v".repeat(n));
const text = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.string({ unit: "binary", maxLength: 10 }),
  fc.constantFrom("%FF", "%C3", "%00", "a%00b", "%E2%82", "%ED%A0%80", "100%", "%25"),
  big(65_535),
  big(65_536),
  big(70_000),
  fc.constant("é".repeat(33_000)), // 66,000 bytes in 33,000 UTF-16 units
);
const key = fc.oneof(
  fc.constantFrom(
    "Mqgw-Prop-x",
    "Mqgw-Prop-%FF",
    "Mqgw-Prop-a%00",
    "Mqgw-Content-Type",
    "Mqgw-Correlation-Id",
    "Mqgw-Reply-To",
    "Mqgw-QoS",
    "Mqgw-Mqtt-Props-Order",
    "Mqgw-Expires",
    "Trace-Id",
  ),
  fc.string({ minLength: 1, maxLength: 8 }).map((k) => `Mqgw-Prop-${k}`),
  big(70_000).map((v) => `Mqgw-Prop-${v}`),
);
const headerMap = fc.array(fc.tuple(key, text), { maxLength: 6 });

function parseAll(bytes: Buffer): Packet[] {
  const parser = mqtt.parser({ protocolVersion: 5 });
  const out: Packet[] = [];
  const errors: Error[] = [];
  parser.on("packet", (p: Packet) => out.push(p));
  parser.on("error", (e: Error) => errors.push(e));
  const left = parser.parse(bytes);
  expect(errors).toEqual([]);
  expect(left).toBe(0);
  return out;
}

describe("the PUBLISH encoder", () => {
  it("writes a length matching its bytes for any header map, and the next packet parses on its own", () => {
    fc.assert(
      fc.property(headerMap, fc.uint8Array({ maxLength: 64 }), (headers, payload) => {
        const out = natsToMqttPublish("t.a", headers, payload, "re.ply", sub, rx);
        if (typeof out === "string") return;
        // The encoder the connection writes a PUBLISH with (packetWriter.ts, mqttFastPath.ts).
        const bytes = encodePublishFast(
          5,
          out.topic,
          payload,
          out.qos,
          out.retain,
          false,
          out.qos > 0 ? 1 : undefined,
          out.properties,
        );
        expect(bytes).toBeInstanceOf(Buffer);
        const next = encodeMqttPacket({ cmd: "pingresp" } as Packet, 5) as Buffer;
        const parsed = parseAll(Buffer.concat([bytes, next]));
        expect(parsed.map((p) => p.cmd)).toEqual(["publish", "pingresp"]);
        const p = parsed[0] as IPublishPacket;
        expect(p.topic).toBe("t/a");
        expect(Buffer.from(p.payload as Buffer).equals(Buffer.from(payload))).toBe(true);
        const up = p.properties?.userProperties ?? {};
        for (const [k, v] of Object.entries(up)) {
          expect(mqttString(k)).toBe(true);
          for (const x of [v].flat()) expect(mqttString(String(x))).toBe(true);
        }
      }),
      { numRuns: 400 },
    );
  });

  it("a value too long for MQTT is left out and counted, never truncated", () => {
    const out = natsToMqttPublish(
      "t.a",
      [
        ["Mqgw-Prop-x", "v".repeat(70_000)],
        ["Mqgw-Prop-y", "ok"],
        ["Mqgw-Content-Type", "c".repeat(70_000)],
        ["Mqgw-Prop-bad", "%FF"],
      ],
      new Uint8Array(),
      undefined,
      sub,
      rx,
    );
    expect(out).toMatchObject({ properties: { userProperties: [["y", "ok"]] }, lost: 3 });
    expect((out as { properties: Record<string, unknown> }).properties.contentType).toBeUndefined();
  });

  it("the generic encoder (CONNACK, SUBACK, DISCONNECT...) refuses, as an Error, a packet mqtt-packet would cut short or refuse (never an error event)", () => {
    const packet = {
      cmd: "publish",
      topic: "t",
      payload: Buffer.from("x"),
      qos: 0,
      retain: false,
      dup: false,
      properties: { userProperties: { x: "v".repeat(70_000) } },
    } as IPublishPacket;
    expect(encodeMqttPacket(packet, 5)).toBeInstanceOf(Error);
    expect(encodeMqttPacket({ cmd: "connack", reasonCode: 0x85, sessionPresent: false } as Packet, 4)).toBeInstanceOf(
      Error,
    );
  });

  it("wholePacket reads the remaining length exactly", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (body) => {
        const bytes = encodeMqttPacket(
          {
            cmd: "publish",
            topic: "t",
            payload: Buffer.from(body),
            qos: 0,
            retain: false,
            dup: false,
          } as IPublishPacket,
          4,
        ) as Buffer;
        expect(wholePacket(bytes)).toBe(true);
        expect(wholePacket(bytes.subarray(0, bytes.length - 1))).toBe(false);
        expect(wholePacket(Buffer.concat([bytes, Buffer.from([0])]))).toBe(false);
      }),
    );
  });
});
