/**
 * rhea's frame writer, for the one frame every message costs: the transfer (part of the
 * rhea vendor module, src/vendor/rhea.ts; docs/decisions/vendor-patches.md). rhea builds
 * each transfer as a composite whose setters wrap every field in a typed value, then
 * writes it with a general Writer that allocates (and zero-fills) 1 KiB per frame: about
 * a tenth of the gateway's CPU per AMQP message (issue 16). Here a transfer is a plain
 * record, written by hand into a buffer of its exact size. Only what lib/session.js
 * `Outgoing.prototype.process` gives `frames.transfer` (handle, delivery-id, tag, format,
 * settled, more) is written this way; any other frame, or a field of a kind it does not
 * know, goes to rhea's own writer.
 */
import { createRequire } from "node:module";

const req = createRequire(import.meta.url);

interface FramesModule {
  transfer(fields: Record<string, unknown>): unknown;
  read_frame(buffer: Buffer): unknown;
  write_frame(frame: { channel: number; type: number; performative?: unknown; payload?: Buffer }): Buffer;
  TYPE_AMQP: number;
}
const frames = req("rhea/lib/frames.js") as FramesModule;

const originalTransfer = frames.transfer;
const originalWriteFrame = frames.write_frame;
const originalReadFrame = frames.read_frame;

/** The upstream functions replaced here, as rhea has them (test/vendor.test.ts hashes them). */
export const upstreamFrames: Readonly<Record<string, unknown>> = {
  "lib/frames.js transfer": originalTransfer,
  "lib/frames.js write_frame": originalWriteFrame,
  "lib/frames.js read_frame": originalReadFrame,
};

/** A transfer as lib/session.js Outgoing.process makes it: what rhea's composite held, unwrapped. */
class OutgoingTransfer {
  constructor(
    readonly handle: number,
    readonly delivery_id: number,
    readonly delivery_tag: Buffer,
    /** undefined: absent (null on the wire, as rhea writes it). */
    readonly message_format: number | undefined,
    readonly settled: boolean | undefined,
    readonly more: boolean | undefined,
  ) {}
}

const KNOWN: ReadonlySet<string> = new Set([
  "handle",
  "delivery_id",
  "delivery_tag",
  "message_format",
  "settled",
  "more",
]);
const onlyKnown = (fields: Record<string, unknown>) => {
  for (const k in fields) if (!KNOWN.has(k)) return false;
  return true;
};

const isUint = (n: unknown): n is number => typeof n === "number" && Number.isInteger(n) && n >= 0 && n <= 0xffffffff;

/** Replaces lib/frames.js `transfer` (the composite's `create`): a plain record, or rhea's composite for anything else. */
function transfer(fields: Record<string, unknown>): unknown {
  const { handle, delivery_id, delivery_tag, message_format, settled, more } = fields;
  if (
    onlyKnown(fields) &&
    isUint(handle) &&
    isUint(delivery_id) &&
    Buffer.isBuffer(delivery_tag) &&
    delivery_tag.length <= 255 &&
    (message_format === undefined || isUint(message_format)) &&
    (settled === undefined || typeof settled === "boolean") &&
    (more === undefined || typeof more === "boolean")
  )
    return new OutgoingTransfer(handle, delivery_id, delivery_tag, message_format, settled, more);
  return originalTransfer(fields);
}

/** Bytes of a uint: null, uint0, smalluint or uint (part 1, 1.6.4). */
const uintSize = (n: number | undefined) => (n === undefined || n === 0 ? 1 : n < 256 ? 2 : 5);

function writeUint(b: Buffer, at: number, n: number | undefined): number {
  if (n === undefined) {
    b[at] = 0x40;
    return at + 1;
  }
  if (n === 0) {
    b[at] = 0x43;
    return at + 1;
  }
  if (n < 256) {
    b[at] = 0x52;
    b[at + 1] = n;
    return at + 2;
  }
  b[at] = 0x70;
  b.writeUInt32BE(n, at + 1);
  return at + 5;
}

/** A transfer frame: frame header, the described list (list8 or list32), the payload. */
function writeTransferFrame(channel: number, t: OutgoingTransfer, payload: Buffer | undefined): Buffer {
  // The list's elements: handle, delivery-id, delivery-tag (vbin8), message-format, settled, more.
  const items =
    uintSize(t.handle) + uintSize(t.delivery_id) + 2 + t.delivery_tag.length + uintSize(t.message_format) + 2;
  // list8 counts its size byte's followers (count + items) in one byte; else list32.
  const small = items + 1 <= 255;
  const listHeader = small ? 3 : 9;
  const size = 8 + 3 + listHeader + items + (payload?.length ?? 0);
  const b = Buffer.allocUnsafe(size);
  b.writeUInt32BE(size, 0);
  b[4] = 2; // doff: the header is 8 bytes
  b[5] = frames.TYPE_AMQP;
  b.writeUInt16BE(channel, 6);
  b[8] = 0x00; // described
  b[9] = 0x53; // smallulong descriptor
  b[10] = 0x14; // transfer
  let at = 11;
  if (small) {
    b[at] = 0xc0;
    b[at + 1] = items + 1;
    b[at + 2] = 6;
    at += 3;
  } else {
    b[at] = 0xd0;
    b.writeUInt32BE(items + 4, at + 1);
    b.writeUInt32BE(6, at + 5);
    at += 9;
  }
  at = writeUint(b, at, t.handle);
  at = writeUint(b, at, t.delivery_id);
  b[at] = 0xa0;
  b[at + 1] = t.delivery_tag.length;
  t.delivery_tag.copy(b, at + 2);
  at += 2 + t.delivery_tag.length;
  at = writeUint(b, at, t.message_format);
  b[at] = t.settled === undefined ? 0x40 : t.settled ? 0x41 : 0x42;
  b[at + 1] = t.more === undefined ? 0x40 : t.more ? 0x41 : 0x42;
  at += 2;
  if (payload) payload.copy(b, at);
  return b;
}

/** Wraps lib/frames.js `write_frame`: a transfer made by `transfer` above is written here. */
function writeFrame(frame: { channel: number; type: number; performative?: unknown; payload?: Buffer }): Buffer {
  if (frame.performative instanceof OutgoingTransfer && frame.type === frames.TYPE_AMQP)
    return writeTransferFrame(frame.channel, frame.performative, frame.payload);
  return originalWriteFrame(frame);
}

// -- reading -------------------------------------------------------------------------------

/**
 * A client's transfer as lib/session.js reads it (Session.on_transfer, Incoming.on_transfer,
 * the gateway's onTransfer): the fields rhea's composite getters would give, null where the
 * list holds a null and undefined past its end, as they do; `dispatch` as the composite's.
 */
class IncomingTransfer {
  handle: unknown;
  delivery_id: unknown;
  delivery_tag: unknown;
  message_format: unknown;
  settled: unknown;
  more: unknown;
  rcv_settle_mode: unknown;
  state: unknown;
  resume: unknown;
  aborted: unknown;
  batchable: unknown;
  dispatch(target: { on_transfer(frame: unknown): void }, frame: unknown): void {
    target.on_transfer(frame);
  }
  static toString(): string {
    return "transfer#14";
  }
}

const TRANSFER_FIELDS = [
  "handle",
  "delivery_id",
  "delivery_tag",
  "message_format",
  "settled",
  "more",
  "rcv_settle_mode",
  "state",
  "resume",
  "aborted",
  "batchable",
] as const;

/** Marks a value this reader does not know (a delivery state, a wider type): rhea's reader takes the frame. */
const UNKNOWN = Symbol("unknown");

/** One list element at `at`: its value and where the next starts, or UNKNOWN. */
function readItem(b: Buffer, at: number, end: number): [unknown, number] | typeof UNKNOWN {
  if (at >= end) return UNKNOWN;
  switch (b[at]) {
    case 0x40:
      return [null, at + 1];
    case 0x41:
      return [true, at + 1];
    case 0x42:
      return [false, at + 1];
    case 0x56:
      return at + 2 <= end && b[at + 1]! <= 1 ? [b[at + 1] === 1, at + 2] : UNKNOWN;
    case 0x43:
      return [0, at + 1];
    case 0x50:
    case 0x52:
      return at + 2 <= end ? [b[at + 1], at + 2] : UNKNOWN;
    case 0x70:
      return at + 5 <= end ? [b.readUInt32BE(at + 1), at + 5] : UNKNOWN;
    case 0xa0: {
      const n = at + 2 <= end ? b[at + 1]! : -1;
      return n >= 0 && at + 2 + n <= end ? [b.subarray(at + 2, at + 2 + n), at + 2 + n] : UNKNOWN;
    }
    default:
      return UNKNOWN;
  }
}

/** A transfer frame's fields and payload read by hand; undefined for anything else, or anything unusual in one. */
function readTransferFrame(b: Buffer): unknown {
  if (b.length < 12) return undefined;
  const size = b.readUInt32BE(0);
  const doff = b[4]!;
  if (size !== b.length || doff < 2 || b[5] !== frames.TYPE_AMQP) return undefined;
  let at = doff * 4;
  if (b[at] !== 0x00 || b[at + 1] !== 0x53 || b[at + 2] !== 0x14) return undefined;
  at += 3;
  let count: number;
  let end: number;
  if (b[at] === 0xc0 && at + 3 <= b.length) {
    end = at + 2 + b[at + 1]!;
    count = b[at + 2]!;
    at += 3;
  } else if (b[at] === 0xd0 && at + 9 <= b.length) {
    // rhea writes every list as list32.
    end = at + 5 + b.readUInt32BE(at + 1);
    count = b.readUInt32BE(at + 5);
    at += 9;
  } else return undefined; // list0 too: a transfer needs its handle, as rhea's reader says
  if (end > b.length || count > TRANSFER_FIELDS.length) return undefined;
  const t = new IncomingTransfer();
  for (let i = 0; i < count; i++) {
    const item = readItem(b, at, end);
    if (item === UNKNOWN) return undefined;
    t[TRANSFER_FIELDS[i]!] = item[0];
    at = item[1];
  }
  if (at !== end) return undefined;
  const frame: { size: number; type: number; channel: number; performative: IncomingTransfer; payload?: Buffer } = {
    size,
    type: frames.TYPE_AMQP,
    channel: b.readUInt16BE(6),
    performative: t,
  };
  if (end < b.length) frame.payload = b.subarray(end);
  return frame;
}

/** Wraps lib/frames.js `read_frame`: a plain transfer is read above, every other frame by rhea. */
function readFrame(buffer: Buffer): unknown {
  return readTransferFrame(buffer) ?? originalReadFrame(buffer);
}

/** Installs these, once, process-wide (a client's transfers in the same process are written the same way). */
export function installFramePatches(): void {
  if (frames.write_frame === writeFrame) return;
  frames.transfer = transfer;
  frames.write_frame = writeFrame;
  frames.read_frame = readFrame;
}
