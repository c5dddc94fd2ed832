import fc from "fast-check";
import mqtt, { type IPublishPacket } from "mqtt-packet";
import { describe, expect, it } from "vitest";
import { encodePublishFast, parsePubackFast, parsePublishFast } from "../../src/protocol/mqttFastPath.js";

/** What mqtt-packet's parser makes of one whole packet (or its error). */
function viaLibrary(bytes: Buffer, version: 4 | 5): IPublishPacket | Error {
  const p = mqtt.parser({ protocolVersion: version });
  let out: IPublishPacket | Error = new Error("no packet");
  p.on("packet", (x) => (out = x as IPublishPacket));
  p.on("error", (e) => (out = e));
  p.parse(bytes);
  return out;
}

const fields = (p: {
  topic: string;
  payload: Buffer | string;
  qos: number;
  retain: boolean;
  dup: boolean;
  messageId?: number | undefined;
}) => ({
  topic: p.topic,
  payload: Buffer.from(p.payload).toString("hex"),
  qos: p.qos,
  retain: p.retain,
  dup: p.dup,
  messageId: p.qos > 0 ? p.messageId : undefined,
});

const publishArb = fc.record({
  version: fc.constantFrom(4 as const, 5 as const),
  topic: fc.oneof(fc.string({ maxLength: 40 }), fc.string({ unit: "grapheme", maxLength: 10 }), fc.constant("a/b/c")),
  payload: fc.uint8Array({ maxLength: 300 }),
  qos: fc.constantFrom(0 as const, 1 as const, 2 as const),
  retain: fc.boolean(),
  dup: fc.boolean(),
  messageId: fc.integer({ min: 1, max: 65535 }),
});

describe("the PUBLISH fast path against mqtt-packet", () => {
  it("encodes byte for byte what generate() writes", () => {
    fc.assert(
      fc.property(publishArb, ({ version, topic, payload, qos, retain, dup, messageId }) => {
        const packet = {
          cmd: "publish" as const,
          topic,
          payload: Buffer.from(payload),
          qos,
          retain,
          dup,
          ...(qos > 0 ? { messageId } : {}),
        };
        const expected = mqtt.generate(packet, { protocolVersion: version });
        expect(
          encodePublishFast(version, topic, packet.payload, qos, retain, dup, qos > 0 ? messageId : undefined).equals(
            expected,
          ),
        ).toBe(true);
      }),
    );
  });

  it("encodes large payloads (3- and 4-byte remaining lengths) as generate() does", () => {
    for (const size of [16_380, 16_400, 2_097_100, 2_097_200]) {
      const payload = Buffer.alloc(size, 1);
      const expected = mqtt.generate(
        { cmd: "publish", topic: "t", payload, qos: 1, retain: false, dup: false, messageId: 7 },
        { protocolVersion: 5 },
      );
      expect(encodePublishFast(5, "t", payload, 1, false, false, 7).equals(expected)).toBe(true);
    }
  });

  it("parses what mqtt-packet parses, or steps aside", () => {
    fc.assert(
      fc.property(publishArb, ({ version, topic, payload, qos, retain, dup, messageId }) => {
        const bytes = mqtt.generate(
          { cmd: "publish", topic, payload: Buffer.from(payload), qos, retain, dup, messageId },
          { protocolVersion: version },
        );
        const fast = parsePublishFast(bytes, version);
        const printable = [...Buffer.from(topic)].every((b) => b >= 0x20 && b <= 0x7e);
        if (!printable) {
          expect(fast).toBeUndefined();
          return;
        }
        const lib = viaLibrary(bytes, version);
        expect(lib).not.toBeInstanceOf(Error);
        expect(fast && fields(fast)).toEqual(fields(lib as IPublishPacket));
      }),
    );
  });

  it("leaves properties a PUBLISH may not carry, bad QoS, truncated and non-PUBLISH packets to mqtt-packet", () => {
    // A Session Expiry Interval (0x11) in a PUBLISH: mqtt-packet judges it.
    const withSessionExpiry = Buffer.from([0x30, 0x0a, 0x00, 0x01, 0x61, 0x05, 0x11, 0x00, 0x00, 0x00, 0x01, 0x78]);
    expect(parsePublishFast(withSessionExpiry, 5)).toBeUndefined();
    // A property block longer than the packet.
    expect(parsePublishFast(Buffer.from([0x30, 0x05, 0x00, 0x01, 0x61, 0x09, 0x01]), 5)).toBeUndefined();
    // The payload format indicator twice.
    expect(
      parsePublishFast(Buffer.from([0x30, 0x08, 0x00, 0x01, 0x61, 0x04, 0x01, 0x01, 0x01, 0x00]), 5),
    ).toBeUndefined();
    expect(parsePublishFast(Buffer.from([0x36, 0x05, 0x00, 0x01, 0x61, 0x00, 0x01]), 4)).toBeUndefined(); // QoS 3
    expect(parsePublishFast(Buffer.from([0x30, 0x03, 0x00, 0x05, 0x61]), 4)).toBeUndefined(); // topic longer than the packet
    expect(parsePublishFast(Buffer.from([0x32, 0x04, 0x00, 0x01, 0x61, 0x00]), 4)).toBeUndefined(); // packet id cut short
    expect(parsePublishFast(Buffer.from([0xc0, 0x00]), 4)).toBeUndefined();
    expect(parsePublishFast(Buffer.from([0x30, 0x04, 0x00, 0x01, 0x00, 0x61]), 4)).toBeUndefined(); // NUL in the topic
  });

  it("PUBACK: parses the short form only (mqttAcks.ts writes it)", () => {
    expect(parsePubackFast(Buffer.from([0x40, 0x02, 0x02, 0x01]))).toEqual({ cmd: "puback", messageId: 513 });
    expect(parsePubackFast(Buffer.from([0x40, 0x04, 0x02, 0x01, 0x00, 0x00]))).toBeUndefined();
    expect(parsePubackFast(Buffer.from([0x42, 0x02, 0x02, 0x01]))).toBeUndefined(); // reserved flags set: mqtt-packet's error
  });
});
