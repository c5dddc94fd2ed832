import { isUtf8 } from "node:buffer";

/**
 * Splits an MQTT byte stream into whole packets before any parser sees them, so an
 * oversize length prefix is refused from its first bytes instead of being buffered.
 */
export type FrameResult =
  | { kind: "packets"; packets: Buffer[]; rest: Buffer }
  | { kind: "too_large"; length: number }
  | { kind: "malformed"; reason: string };

const EMPTY = Buffer.alloc(0);

/** Reads the Remaining Length varint at `offset`; undefined when more bytes are needed. */
export function readRemainingLength(
  buf: Buffer,
  offset: number,
): { length: number; bytes: number } | "malformed" | undefined {
  let multiplier = 1;
  let value = 0;
  for (let i = 0; i < 4; i++) {
    if (offset + i >= buf.length) return undefined;
    const byte = buf[offset + i]!;
    value += (byte & 0x7f) * multiplier;
    if ((byte & 0x80) === 0) return { length: value, bytes: i + 1 };
    multiplier *= 128;
  }
  // [MQTT-1.5.5] at most four bytes.
  return "malformed";
}

export function splitFrames(buffered: Buffer, maxPacketSize: number): FrameResult {
  const packets: Buffer[] = [];
  let pos = 0;
  while (pos + 2 <= buffered.length) {
    const rl = readRemainingLength(buffered, pos + 1);
    if (rl === "malformed") return { kind: "malformed", reason: "remaining length longer than four bytes" };
    if (rl === undefined) break;
    const total = 1 + rl.bytes + rl.length;
    if (total > maxPacketSize) return { kind: "too_large", length: total };
    if (pos + total > buffered.length) break;
    packets.push(buffered.subarray(pos, pos + total));
    pos += total;
  }
  return { kind: "packets", packets, rest: pos === buffered.length ? EMPTY : buffered.subarray(pos) };
}

/**
 * [MQTT-1.5.4-1] a topic must be well-formed UTF-8 without U+0000. mqtt-packet decodes
 * it leniently, so the PUBLISH topic is checked on the bytes; returns the reason, or
 * undefined when the packet is not a PUBLISH or its topic is fine.
 */
export function badPublishTopic(packet: Buffer): string | undefined {
  if (packet[0]! >> 4 !== 3) return undefined;
  const rl = readRemainingLength(packet, 1);
  if (rl === undefined || rl === "malformed") return undefined;
  const at = 1 + rl.bytes;
  if (at + 2 > packet.length) return undefined;
  const len = packet.readUInt16BE(at);
  const topic = packet.subarray(at + 2, at + 2 + len);
  if (!isUtf8(topic)) return "topic is not valid UTF-8";
  if (topic.includes(0)) return "topic holds U+0000";
  return undefined;
}

/**
 * The protocol level of a CONNECT naming "MQTT" or "MQIsdp" when it is one the gateway
 * does not speak (not 4 or 5), else undefined. mqtt-packet refuses an unknown level as a
 * malformed packet; [MQTT-3.1.2-2] asks for CONNACK 0x01 and a close instead, as
 * mosquitto answers.
 */
export function unsupportedConnectLevel(packet: Buffer): number | undefined {
  if (packet[0] !== 0x10) return undefined;
  const rl = readRemainingLength(packet, 1);
  if (rl === undefined || rl === "malformed") return undefined;
  const at = 1 + rl.bytes;
  if (at + 2 > packet.length) return undefined;
  const nameLength = packet.readUInt16BE(at);
  const levelAt = at + 2 + nameLength;
  if (levelAt >= packet.length) return undefined;
  const name = packet.toString("latin1", at + 2, levelAt);
  if (name !== "MQTT" && name !== "MQIsdp") return undefined;
  const level = packet[levelAt]!;
  return level === 4 || level === 5 ? undefined : level;
}

/** [MQTT-3.8.3-3, MQTT-3.10.3-2] a SUBSCRIBE or UNSUBSCRIBE names at least one topic filter; none is a Protocol Error (MQTT 5 3.8.3, 3.10.3). */
export function noTopicFilter(
  p: { cmd: "subscribe"; subscriptions: unknown[] } | { cmd: "unsubscribe"; unsubscriptions: unknown[] },
): boolean {
  return (p.cmd === "subscribe" ? p.subscriptions : p.unsubscriptions).length === 0;
}
