// Issue 22, item 4: PUBACK, PUBREC, PUBREL and PUBCOMP in their shortest form (MQTT 5
// 3.4.2.1, 3.5.2.1, 3.6.2.1, 3.7.2.1), as mosquitto writes them and as Debian's paho-mqtt
// 1.6.1 reads them; what the gateway's writer sends, read back with mqtt-packet.
import fc from "fast-check";
import mqtt, { type Packet } from "mqtt-packet";
import { describe, expect, it } from "vitest";
import { PacketWriter } from "../../src/actors/mqtt/packetWriter.js";
import { type AckCmd, encodeAck } from "../../src/protocol/mqttAcks.js";

const cmds: AckCmd[] = ["puback", "pubrec", "pubrel", "pubcomp"];

/** The packets mqtt-packet's parser reads from these bytes (throws on its error). */
function decode(bytes: Buffer, protocolVersion: 4 | 5): Packet[] {
  const parser = mqtt.parser({ protocolVersion });
  const out: Packet[] = [];
  parser.on("packet", (p: Packet) => out.push(p));
  parser.on("error", (e: Error) => {
    throw e;
  });
  parser.parse(bytes);
  return out;
}

/** What one PacketWriter writes for a packet. */
function written(version: 4 | 5, packet: Packet): Buffer {
  const parts: Buffer[] = [];
  const outbox = { bytes: (b: Buffer) => parts.push(b) };
  const writer = new PacketWriter(outbox as never, { tooLarge() {}, unencodable() {} });
  writer.configure(version);
  expect(writer.write(packet)).toBe(true);
  return Buffer.concat(parts);
}

/** The reason codes each packet may carry (MQTT 5 3.4.2.1 ... 3.7.2.1). */
const reasonsOf: Record<AckCmd, number[]> = {
  puback: [0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99],
  pubrec: [0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99],
  pubrel: [0x00, 0x92],
  pubcomp: [0x00, 0x92],
};
const properties = fc.option(
  fc.oneof(
    fc.constant({}),
    fc.record({ reasonString: fc.string({ maxLength: 20 }) }),
    fc.record({
      userProperties: fc.dictionary(fc.string({ minLength: 1, maxLength: 5 }), fc.string({ maxLength: 5 }), {
        minKeys: 1,
        maxKeys: 3,
      }),
    }),
  ),
  { nil: undefined },
);

describe("acknowledgements in their shortest form", () => {
  it("remaining length 2 iff success (or 3.1.1) and no properties; mqtt-packet reads back id, reason and properties", () => {
    fc.assert(
      fc.property(
        fc.constantFrom<4 | 5>(4, 5),
        fc.constantFrom(...cmds).chain((cmd) => fc.tuple(fc.constant(cmd), fc.constantFrom(...reasonsOf[cmd]))),
        fc.integer({ min: 1, max: 65535 }),
        properties,
        (version, [cmd, reasonCode], messageId, props) => {
          const v5Reason = version === 5 ? reasonCode : 0;
          const packet = {
            cmd,
            messageId,
            ...(v5Reason ? { reasonCode } : {}),
            ...(version === 5 && props ? { properties: props } : {}),
          } as Packet;
          const bytes = written(version, packet);
          const hasProps = version === 5 && props !== undefined && Object.keys(props).length > 0;
          expect(bytes[1] === 2).toBe(v5Reason === 0 && !hasProps);
          if (!hasProps) expect(bytes[1]).toBe(v5Reason === 0 ? 2 : 3);
          const [back, ...more] = decode(bytes, version);
          expect(more).toEqual([]);
          expect(back).toMatchObject({ cmd, messageId, length: bytes.length - 2 });
          if (version === 5) {
            expect((back as { reasonCode?: number }).reasonCode ?? 0).toBe(v5Reason);
            if (hasProps) expect((back as { properties?: object }).properties).toEqual(props);
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it("byte for byte: mosquitto's success PUBREL, and a 0x92 PUBREL without properties", () => {
    expect([...encodeAck(5, "pubrel", 0x0102)]).toEqual([0x62, 0x02, 0x01, 0x02]);
    expect([...encodeAck(4, "pubrel", 0x0102)]).toEqual([0x62, 0x02, 0x01, 0x02]);
    expect([...encodeAck(5, "pubrel", 0x0102, 0x92)]).toEqual([0x62, 0x03, 0x01, 0x02, 0x92]);
    expect([...encodeAck(5, "puback", 7)]).toEqual([0x40, 0x02, 0x00, 0x07]);
    expect([...encodeAck(5, "pubrec", 7)]).toEqual([0x50, 0x02, 0x00, 0x07]);
    expect([...encodeAck(5, "pubcomp", 7)]).toEqual([0x70, 0x02, 0x00, 0x07]);
  });
});
