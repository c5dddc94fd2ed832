/**
 * MQTT 5 property blocks, checked for shape before mqtt-packet reads them. mqtt-packet
 * reads a property's string with the length the string claims, past the end of the
 * property block and into the payload: a user property key "running past its property
 * block" was accepted and published, with part of the payload as its key. MQTT 5
 * (2.2.2.2) makes that a Malformed Packet; Mosquitto answers DISCONNECT 0x81 and
 * closes, and so does the gateway. Pure; one whole frame (from `splitFrames`) at a time.
 * (mqttProperties.ts reads a PUBLISH's properties for the fast path and leaves a block it
 * cannot read to mqtt-packet; this judges every packet's blocks before either reads them.)
 */
import { readVarInt } from "./mqttProperties.js";

/** Bytes each property's value takes: a fixed size, or how it is read. */
type Shape = 1 | 2 | 4 | "varint" | "string" | "pair";

const SHAPES: ReadonlyMap<number, Shape> = new Map<number, Shape>([
  [0x01, 1], // payload format indicator
  [0x02, 4], // message expiry interval
  [0x03, "string"], // content type
  [0x08, "string"], // response topic
  [0x09, "string"], // correlation data (binary: the same two-byte length)
  [0x0b, "varint"], // subscription identifier
  [0x11, 4], // session expiry interval
  [0x12, "string"], // assigned client identifier
  [0x13, 2], // server keep alive
  [0x15, "string"], // authentication method
  [0x16, "string"], // authentication data (binary)
  [0x17, 1], // request problem information
  [0x18, 4], // will delay interval
  [0x19, 1], // request response information
  [0x1a, "string"], // response information
  [0x1c, "string"], // server reference
  [0x1f, "string"], // reason string
  [0x21, 2], // receive maximum
  [0x22, 2], // topic alias maximum
  [0x23, 2], // topic alias
  [0x24, 1], // maximum qos
  [0x25, 1], // retain available
  [0x26, "pair"], // user property
  [0x27, 4], // maximum packet size
  [0x28, 1], // wildcard subscription available
  [0x29, 1], // subscription identifier available
  [0x2a, 1], // shared subscription available
]);

const u16 = (b: Uint8Array, at: number): number => (b[at]! << 8) | b[at + 1]!;

/** The property block at `at` (its length first): where it ends, or why it is malformed. */
function block(b: Uint8Array, at: number, end: number): { next: number } | string {
  const len = readVarInt(b, at, end);
  if (!len) return "property length runs past the packet";
  const stop = len.next + len.value;
  if (stop > end) return "property block runs past the packet";
  let pos = len.next;
  while (pos < stop) {
    const id = b[pos++]!;
    const shape = SHAPES.get(id);
    if (shape === undefined) return `unknown property 0x${id.toString(16)}`;
    if (typeof shape === "number") pos += shape;
    else if (shape === "varint") {
      const v = readVarInt(b, pos, stop);
      if (!v) return `property 0x${id.toString(16)} runs past its property block`;
      pos = v.next;
    } else {
      for (let n = shape === "pair" ? 2 : 1; n > 0; n--) {
        if (pos + 2 > stop) return `property 0x${id.toString(16)} runs past its property block`;
        pos += 2 + u16(b, pos);
      }
    }
    if (pos > stop) return `property 0x${id.toString(16)} runs past its property block`;
  }
  return { next: stop };
}

/**
 * Why the property blocks of an MQTT 5 packet are malformed, or undefined (also for any
 * packet of a 3.1.1 connection, and for a CONNECT of another level). `frame` is one whole packet.
 */
export function propertiesProblem(frame: Uint8Array, version: 4 | 5): string | undefined {
  const type = frame[0]! >> 4;
  const rl = readVarInt(frame, 1, frame.length);
  if (!rl) return undefined; // splitFrames has already judged the fixed header
  let pos = rl.next;
  const end = frame.length;
  const check = (at: number): number | string => {
    const r = block(frame, at, end);
    return typeof r === "string" ? r : r.next;
  };
  if (type === 1) return connectProblem(frame, pos, end, check);
  if (version !== 5) return undefined;
  const remaining = end - pos;
  switch (type) {
    case 3: {
      if (pos + 2 > end) return undefined; // mqtt-packet refuses it
      pos += 2 + u16(frame, pos);
      if ((frame[0]! >> 1) & 3) pos += 2;
      if (pos >= end) return undefined;
      const r = check(pos);
      return typeof r === "string" ? r : undefined;
    }
    case 4:
    case 5:
    case 6:
    case 7: {
      if (remaining <= 3) return undefined;
      const r = check(pos + 3);
      return typeof r === "string" ? r : undefined;
    }
    case 8:
    case 10: {
      if (remaining <= 2) return undefined;
      const r = check(pos + 2);
      return typeof r === "string" ? r : undefined;
    }
    case 14:
    case 15: {
      if (remaining <= 1) return undefined;
      const r = check(pos + 1);
      return typeof r === "string" ? r : undefined;
    }
    default:
      return undefined;
  }
}

/** CONNECT of level 5: its properties after the variable header, and the will's after the client id. */
function connectProblem(
  b: Uint8Array,
  at: number,
  end: number,
  check: (at: number) => number | string,
): string | undefined {
  if (at + 2 > end) return undefined;
  let pos = at + 2 + u16(b, at); // protocol name
  if (pos + 4 > end || b[pos] !== 5) return undefined; // not MQTT 5 (or too short: mqtt-packet's to refuse)
  const flags = b[pos + 1]!;
  pos += 4; // level, flags, keep alive
  const props = check(pos);
  if (typeof props === "string") return props;
  pos = props;
  if (pos + 2 > end) return undefined;
  pos += 2 + u16(b, pos); // client id
  if ((flags & 0x04) === 0 || pos > end) return undefined;
  const will = check(pos);
  return typeof will === "string" ? `will ${will}` : undefined;
}
