// A strict reader of the bytes an AMQP 1.0 peer writes, as strict clients read them:
// Azure's go-amqp refuses a composite with more list elements than its type has fields
// ("invalid field count 11 for 0x29"), where rhea and Qpid Proton ignore the excess. This
// reader refuses the same, and anything else malformed (a size that does not add up, an
// unknown constructor), for every composite of the core, messaging, transactions and
// security parts, in the frames and in the message sections of each transfer. Pure: bytes
// in, the first problem out; the tap in front of the gateway's AMQP listener
// (amqpTap.ts) feeds it every byte the gateway writes.

/** Fields of each composite type of AMQP 1.0, by descriptor code. */
export const COMPOSITE_FIELDS: ReadonlyMap<number, { readonly name: string; readonly fields: number }> = new Map([
  // part 2, transport
  [0x10, { name: "open", fields: 10 }],
  [0x11, { name: "begin", fields: 8 }],
  [0x12, { name: "attach", fields: 14 }],
  [0x13, { name: "flow", fields: 11 }],
  [0x14, { name: "transfer", fields: 11 }],
  [0x15, { name: "disposition", fields: 6 }],
  [0x16, { name: "detach", fields: 3 }],
  [0x17, { name: "end", fields: 1 }],
  [0x18, { name: "close", fields: 1 }],
  [0x1d, { name: "error", fields: 3 }],
  // part 3, messaging: delivery states, termini, outcomes of a terminus's lifetime
  [0x23, { name: "received", fields: 2 }],
  [0x24, { name: "accepted", fields: 0 }],
  [0x25, { name: "rejected", fields: 1 }],
  [0x26, { name: "released", fields: 0 }],
  [0x27, { name: "modified", fields: 3 }],
  [0x28, { name: "source", fields: 11 }],
  [0x29, { name: "target", fields: 7 }],
  [0x2b, { name: "delete-on-close", fields: 0 }],
  [0x2c, { name: "delete-on-no-links", fields: 0 }],
  [0x2d, { name: "delete-on-no-messages", fields: 0 }],
  [0x2e, { name: "delete-on-no-links-or-messages", fields: 0 }],
  // part 4, transactions
  [0x30, { name: "coordinator", fields: 1 }],
  [0x31, { name: "declare", fields: 1 }],
  [0x32, { name: "discharge", fields: 2 }],
  [0x33, { name: "declared", fields: 1 }],
  [0x34, { name: "transactional-state", fields: 2 }],
  // part 5, security
  [0x40, { name: "sasl-mechanisms", fields: 1 }],
  [0x41, { name: "sasl-init", fields: 3 }],
  [0x42, { name: "sasl-challenge", fields: 1 }],
  [0x43, { name: "sasl-response", fields: 1 }],
  [0x44, { name: "sasl-outcome", fields: 2 }],
  // part 3, message sections that are lists
  [0x70, { name: "header", fields: 5 }],
  [0x73, { name: "properties", fields: 13 }],
]);

const BY_SYMBOL: ReadonlyMap<string, number> = new Map(
  [...COMPOSITE_FIELDS].map(([code, { name }]) => [`amqp:${name}:list`, code]),
);

const PERFORMATIVES = new Set([0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]);
const SASL_FRAMES = new Set([0x40, 0x41, 0x42, 0x43, 0x44]);
const SECTIONS = new Set([0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78]);

export class StrictAmqpError extends Error {}

/** A decoded value, as far as the checks need it. */
export type Value =
  | { kind: "scalar"; value: unknown }
  | { kind: "list"; items: Value[] }
  | { kind: "map"; entries: Value[] }
  | { kind: "array"; items: Value[] }
  | { kind: "described"; descriptor: Value; value: Value };

/** Fixed-width constructors and their widths (part 1, 1.6). */
const FIXED: ReadonlyMap<number, number> = new Map([
  ...[0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56].map((c) => [c, 1] as const),
  ...[0x60, 0x61].map((c) => [c, 2] as const),
  ...[0x70, 0x71, 0x72, 0x73, 0x74].map((c) => [c, 4] as const),
  ...[0x80, 0x81, 0x82, 0x83, 0x84].map((c) => [c, 8] as const),
  ...[0x94, 0x98].map((c) => [c, 16] as const),
]);

function need(at: number, n: number, end: number): void {
  if (at + n > end) throw new StrictAmqpError(`value runs past its end (${n} bytes at ${at}, end ${end})`);
}

/** The descriptor's code: a ulong, or a symbol of a known composite; undefined for others. */
function codeOf(descriptor: Value): number | undefined {
  if (descriptor.kind !== "scalar") return undefined;
  const v = descriptor.value;
  if (typeof v === "bigint") return v <= 0xffffn ? Number(v) : undefined;
  if (typeof v === "number") return v;
  if (typeof v === "string") return BY_SYMBOL.get(v);
  return undefined;
}

/** Checks a described value: a known composite must be a list of at most its fields. */
function checkDescribed(descriptor: Value, value: Value): void {
  const code = codeOf(descriptor);
  const type = code === undefined ? undefined : COMPOSITE_FIELDS.get(code);
  if (!type) return;
  if (value.kind !== "list")
    throw new StrictAmqpError(`${type.name} (0x${code!.toString(16)}) is a ${value.kind}, not a list`);
  if (value.items.length > type.fields)
    throw new StrictAmqpError(
      `invalid field count ${value.items.length} for 0x${code!.toString(16)} (${type.name} has ${type.fields})`,
    );
}

/** Reads the value at `at` whose constructor is `ctor` (already read), up to `end`. */
function readBody(b: Buffer, ctor: number, at: number, end: number): [Value, number] {
  switch (ctor) {
    case 0x40:
      return [{ kind: "scalar", value: null }, at];
    case 0x41:
      return [{ kind: "scalar", value: true }, at];
    case 0x42:
      return [{ kind: "scalar", value: false }, at];
    case 0x43:
      return [{ kind: "scalar", value: 0 }, at];
    case 0x44:
      return [{ kind: "scalar", value: 0n }, at];
    case 0x45:
      return [{ kind: "list", items: [] }, at];
    case 0x53:
      need(at, 1, end);
      return [{ kind: "scalar", value: BigInt(b[at]!) }, at + 1];
    case 0x80:
      need(at, 8, end);
      return [{ kind: "scalar", value: b.readBigUInt64BE(at) }, at + 8];
    case 0x56:
      need(at, 1, end);
      if (b[at]! > 1) throw new StrictAmqpError(`boolean 0x${b[at]!.toString(16)}`);
      return [{ kind: "scalar", value: b[at] === 1 }, at + 1];
    case 0xa0:
    case 0xa1:
    case 0xa3:
    case 0xb0:
    case 0xb1:
    case 0xb3: {
      const wide = ctor >= 0xb0;
      need(at, wide ? 4 : 1, end);
      const n = wide ? b.readUInt32BE(at) : b[at]!;
      const from = at + (wide ? 4 : 1);
      need(from, n, end);
      const raw = b.subarray(from, from + n);
      const value = (ctor & 0x0f) === 0 ? raw : raw.toString((ctor & 0x0f) === 3 ? "latin1" : "utf8");
      return [{ kind: "scalar", value }, from + n];
    }
    case 0xc0:
    case 0xc1:
    case 0xd0:
    case 0xd1: {
      const wide = ctor >= 0xd0;
      need(at, wide ? 8 : 2, end);
      const size = wide ? b.readUInt32BE(at) : b[at]!;
      const count = wide ? b.readUInt32BE(at + 4) : b[at + 1]!;
      const w = wide ? 4 : 1;
      const listEnd = at + w + size;
      if (size < w) throw new StrictAmqpError(`compound size ${size} holds no count`);
      need(at + w, size, end);
      if ((ctor & 0x0f) === 1 && count % 2 !== 0) throw new StrictAmqpError(`map of ${count} elements`);
      const items: Value[] = [];
      let p = at + 2 * w;
      for (let i = 0; i < count; i++) {
        const [v, next] = readValue(b, p, listEnd);
        items.push(v);
        p = next;
      }
      if (p !== listEnd) throw new StrictAmqpError(`compound of size ${size} holds ${p - at - w} bytes`);
      return [(ctor & 0x0f) === 1 ? { kind: "map", entries: items } : { kind: "list", items }, listEnd];
    }
    case 0xe0:
    case 0xf0: {
      const wide = ctor === 0xf0;
      need(at, wide ? 8 : 2, end);
      const size = wide ? b.readUInt32BE(at) : b[at]!;
      const count = wide ? b.readUInt32BE(at + 4) : b[at + 1]!;
      const w = wide ? 4 : 1;
      const arrayEnd = at + w + size;
      need(at + w, size, end);
      let p = at + 2 * w;
      // One constructor for every element; a described one carries its descriptor once.
      need(p, 1, arrayEnd);
      let descriptor: Value | undefined;
      if (b[p] === 0x00) {
        const [d, next] = readValue(b, p + 1, arrayEnd);
        descriptor = d;
        p = next;
      }
      need(p, 1, arrayEnd);
      const elementCtor = b[p]!;
      p++;
      const items: Value[] = [];
      for (let i = 0; i < count; i++) {
        const [v, next] = readBody(b, elementCtor, p, arrayEnd);
        if (descriptor) checkDescribed(descriptor, v);
        items.push(descriptor ? { kind: "described", descriptor, value: v } : v);
        p = next;
      }
      if (p !== arrayEnd) throw new StrictAmqpError(`array of size ${size} holds ${p - at - w} bytes`);
      return [{ kind: "array", items }, arrayEnd];
    }
    default: {
      const n = FIXED.get(ctor);
      if (n === undefined) throw new StrictAmqpError(`unknown constructor 0x${ctor.toString(16)} at ${at - 1}`);
      need(at, n, end);
      return [{ kind: "scalar", value: b.subarray(at, at + n) }, at + n];
    }
  }
}

/** Reads one value (constructor included) at `at`, up to `end`; throws StrictAmqpError on anything a strict peer refuses. */
export function readValue(b: Buffer, at: number, end: number = b.length): [Value, number] {
  need(at, 1, end);
  const ctor = b[at]!;
  if (ctor !== 0x00) return readBody(b, ctor, at + 1, end);
  const [descriptor, afterDescriptor] = readValue(b, at + 1, end);
  if (descriptor.kind === "described") throw new StrictAmqpError("a descriptor that is itself described");
  const [value, next] = readValue(b, afterDescriptor, end);
  checkDescribed(descriptor, value);
  return [{ kind: "described", descriptor, value }, next];
}

/** Reads a frame body's performative; its code (and, for a transfer, its handle and more flag). */
function readPerformative(body: Buffer, allowed: ReadonlySet<number>): { code: number; end: number; list: Value[] } {
  const [v, end] = readValue(body, 0);
  const code = v.kind === "described" ? codeOf(v.descriptor) : undefined;
  if (v.kind !== "described" || code === undefined || !allowed.has(code))
    throw new StrictAmqpError("frame body is not a performative of its frame type");
  return { code, end, list: (v.value as { items: Value[] }).items };
}

/** The message sections of a whole delivery: each a described section, in any number. */
export function checkSections(message: Buffer): void {
  let at = 0;
  while (at < message.length) {
    const [v, next] = readValue(message, at);
    const code = v.kind === "described" ? codeOf(v.descriptor) : undefined;
    if (code === undefined || !SECTIONS.has(code))
      throw new StrictAmqpError(`message section at ${at} is not a section`);
    at = next;
  }
}

const scalarOf = (v: Value | undefined) => (v?.kind === "scalar" ? v.value : undefined);

/**
 * One direction of an AMQP connection, fed in chunks as they come: protocol headers,
 * SASL frames, then AMQP frames. `push` throws StrictAmqpError at the first problem.
 */
export class StrictAmqpStream {
  private buffered: Buffer = Buffer.alloc(0);
  /** Where the stream is: a protocol header due, or frames of one layer. */
  private state: "header" | "sasl" | "amqp" = "header";
  /** Message bytes of deliveries still arriving, by channel and handle. */
  private readonly partial = new Map<string, Buffer[]>();
  frames = 0;

  /** Told each performative read (its code and fields), once it passed. */
  private readonly seen: ((code: number, fields: Value[]) => void) | undefined;

  // No parameter properties: the tap's worker runs this file with Node's own type stripping.
  constructor(seen?: (code: number, fields: Value[]) => void) {
    this.seen = seen;
  }

  push(chunk: Buffer): void {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    for (;;) {
      if (this.state === "header") {
        if (this.buffered.length < 8) return;
        const h = this.buffered.subarray(0, 8);
        if (
          h.toString("latin1", 0, 4) !== "AMQP" ||
          h[5] !== 1 ||
          h[6] !== 0 ||
          h[7] !== 0 ||
          (h[4] !== 0 && h[4] !== 3)
        )
          throw new StrictAmqpError(`protocol header ${h.toString("hex")}`);
        this.state = h[4] === 3 ? "sasl" : "amqp";
        this.buffered = this.buffered.subarray(8);
        continue;
      }
      if (this.buffered.length < 8) return;
      const size = this.buffered.readUInt32BE(0);
      const doff = this.buffered[4]!;
      if (size < 8 || doff < 2 || doff * 4 > size) throw new StrictAmqpError(`frame size ${size}, doff ${doff}`);
      if (this.buffered.length < size) return;
      const frame = this.buffered.subarray(0, size);
      this.buffered = this.buffered.subarray(size);
      this.frame(frame);
    }
  }

  private frame(frame: Buffer): void {
    this.frames++;
    const type = frame[5]!;
    const body = frame.subarray(frame[4]! * 4);
    if (this.state === "sasl") {
      if (type !== 1) throw new StrictAmqpError(`frame type ${type} during SASL`);
      const p = readPerformative(body, SASL_FRAMES);
      if (p.end !== body.length) throw new StrictAmqpError("bytes after a SASL frame's body");
      // After the outcome, the AMQP layer starts with its own protocol header.
      if (p.code === 0x44) this.state = "header";
      this.seen?.(p.code, p.list);
      return;
    }
    if (type !== 0) throw new StrictAmqpError(`frame type ${type} after the AMQP header`);
    if (body.length === 0) return; // an empty frame: a heartbeat
    const p = readPerformative(body, PERFORMATIVES);
    this.seen?.(p.code, p.list);
    const payload = body.subarray(p.end);
    if (p.code !== 0x14) {
      if (payload.length > 0) throw new StrictAmqpError(`payload after a performative 0x${p.code.toString(16)}`);
      return;
    }
    const key = `${frame.readUInt16BE(6)}/${String(scalarOf(p.list[0]))}`;
    const parts = this.partial.get(key) ?? [];
    parts.push(payload);
    const aborted = scalarOf(p.list[9]) === true;
    if (scalarOf(p.list[5]) === true && !aborted) {
      this.partial.set(key, parts);
      return;
    }
    this.partial.delete(key);
    if (!aborted) checkSections(Buffer.concat(parts));
  }
}
