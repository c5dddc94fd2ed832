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
export function readRemainingLength(buf: Buffer, offset: number): { length: number; bytes: number } | "malformed" | undefined {
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
