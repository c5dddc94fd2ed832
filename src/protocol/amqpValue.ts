/**
 * AMQP values -> the text that NATS headers and MQTT User Properties carry
 * (mapping-to-nats.md, "Headers": a number is decimal, a boolean true or false, a
 * timestamp Unix milliseconds, a uuid its canonical form, binary base64; null,
 * decimal, lists and maps are dropped).
 *
 * Give these functions values as rhea's Reader returns them (Typed: the AMQP type is
 * known). rhea's own message decoding unwraps values to plain JavaScript, where a uuid
 * and binary are both a Buffer and a ulong past 2^53 is a Buffer too; plain values are
 * accepted, but a Buffer can then only be read as binary.
 */

/** The shape of a value read by rhea's types.Reader. */
export interface TypedValue {
  readonly type: { readonly typecode: number };
  readonly value: unknown;
  readonly descriptor?: unknown;
}

export function isTyped(v: unknown): v is TypedValue {
  if (typeof v !== "object" || v === null || !("type" in v) || !("value" in v)) return false;
  const t = (v as { type: unknown }).type;
  return typeof t === "object" && t !== null && typeof (t as { typecode?: unknown }).typecode === "number";
}

const asBytes = (v: unknown): Uint8Array | undefined => (v instanceof Uint8Array ? v : undefined);

const base64 = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("base64");

const bigEndian = (b: Uint8Array, signed: boolean): bigint | undefined => {
  if (b.length !== 8) return undefined;
  const view = new DataView(b.buffer, b.byteOffset, 8);
  return signed ? view.getBigInt64(0) : view.getBigUint64(0);
};

/** rhea reads a (u)long within ±2^53 as a number and a larger one as its 8 raw bytes. */
const longText =
  (signed: boolean) =>
  (v: unknown): string | undefined => {
    if (typeof v === "number") return Number.isSafeInteger(v) ? String(v) : undefined;
    const b = asBytes(v);
    return b ? bigEndian(b, signed)?.toString() : undefined;
  };

const integerText = (v: unknown): string | undefined => (typeof v === "number" ? String(v) : undefined);

/** The shortest decimal that reads back as the same float32, not the float64 widening (0.1, not 0.10000000149011612). */
export function float32Text(f: number): string {
  if (!Number.isFinite(f)) return String(f);
  for (let p = 1; p < 9; p++) {
    const n = Number(f.toPrecision(p));
    if (Math.fround(n) === f) return String(n);
  }
  return String(f);
}

export function uuidText(b: Uint8Array): string | undefined {
  if (b.length !== 16) return undefined;
  let h = "";
  for (const x of b) h += x.toString(16).padStart(2, "0");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const timestampText = (v: unknown): string | undefined => {
  const ms = v instanceof Date ? v.getTime() : typeof v === "number" ? v : Number.NaN;
  return Number.isFinite(ms) ? String(ms) : undefined;
};

const stringText = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const dropped = (): undefined => undefined;

/** AMQP 1.0 part 1, 1.6: every primitive encoding by its constructor code. */
const TEXT_BY_TYPECODE: ReadonlyMap<number, (v: unknown) => string | undefined> = new Map<
  number,
  (v: unknown) => string | undefined
>([
  [0x40, dropped], // null
  [0x41, () => "true"],
  [0x42, () => "false"],
  [0x56, (v) => (v ? "true" : "false")], // boolean with a one-byte value
  [0x50, integerText], // ubyte
  [0x60, integerText], // ushort
  [0x70, integerText], // uint
  [0x52, integerText], // smalluint
  [0x43, () => "0"], // uint0
  [0x80, longText(false)], // ulong
  [0x53, integerText], // smallulong
  [0x44, () => "0"], // ulong0
  [0x51, integerText], // byte
  [0x61, integerText], // short
  [0x71, integerText], // int
  [0x54, integerText], // smallint
  [0x81, longText(true)], // long
  [0x55, integerText], // smalllong
  [0x72, (v) => (typeof v === "number" ? float32Text(v) : undefined)], // float
  [0x82, (v) => (typeof v === "number" ? String(v) : undefined)], // double
  [0x74, dropped], // decimal32
  [0x84, dropped], // decimal64
  [0x94, dropped], // decimal128
  // A char is one Unicode code point: as text it is that character.
  [0x73, (v) => (typeof v === "number" && v >= 0 && v <= 0x10ffff ? String.fromCodePoint(v) : undefined)],
  [0x83, timestampText],
  [0x98, (v) => uuidText(asBytes(v) ?? new Uint8Array())], // uuid
  [0xa0, (v) => (asBytes(v) ? base64(asBytes(v)!) : undefined)], // vbin8
  [0xb0, (v) => (asBytes(v) ? base64(asBytes(v)!) : undefined)], // vbin32
  [0xa1, stringText], // str8
  [0xb1, stringText], // str32
  [0xa3, stringText], // sym8: a symbol is ASCII text
  [0xb3, stringText], // sym32
  // list0, list8, list32, map8, map32, array8, array32 have no entry: dropped.
]);

/** Text for an application property value, or undefined when the spec drops the type. */
export function applicationPropertyToText(v: unknown): string | undefined {
  if (isTyped(v)) {
    // Described values are not allowed in application-properties (part 3, 3.2.5).
    if (v.descriptor !== undefined) return undefined;
    return TEXT_BY_TYPECODE.get(v.type.typecode)?.(v.value);
  }
  switch (typeof v) {
    case "string":
      return v;
    case "boolean":
      return v ? "true" : "false";
    case "number":
      return Number.isFinite(v) ? String(v) : undefined;
    case "bigint":
      return v.toString();
    default:
      if (v instanceof Date) return timestampText(v);
      if (v instanceof Uint8Array) return base64(v);
      return undefined;
  }
}

/**
 * An application-properties map, as rhea's Reader returns it (a Typed map: keys and
 * values alternate) or as rhea's message decoding returns it (a plain object), to
 * text pairs in map order. Entries whose value is dropped, or whose key is not a
 * string, are left out.
 */
export function applicationPropertiesToText(map: unknown): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  if (isTyped(map)) {
    const items = map.value;
    if (!Array.isArray(items)) return out;
    for (let i = 0; i + 1 < items.length; i += 2) {
      const k: unknown = items[i];
      const key = isTyped(k) ? stringText(k.value) : undefined;
      const text = applicationPropertyToText(items[i + 1]);
      if (key !== undefined && text !== undefined) out.push([key, text]);
    }
    return out;
  }
  if (typeof map !== "object" || map === null) return out;
  for (const [k, v] of Object.entries(map)) {
    const text = applicationPropertyToText(v);
    if (text !== undefined) out.push([k, text]);
  }
  return out;
}

const utf8 = new TextEncoder();

/**
 * An AMQP message-id or correlation-id (ulong, uuid, binary or string) as bytes for
 * Mqgw-Correlation-Id: binary as is, the others as the UTF-8 of their text, so a uuid
 * reads as its canonical form there and a ulong as decimal.
 */
export function messageIdToBytes(v: unknown): Uint8Array | undefined {
  if (isTyped(v) && (v.type.typecode === 0xa0 || v.type.typecode === 0xb0)) return asBytes(v.value);
  if (!isTyped(v) && v instanceof Uint8Array) return v;
  const text = messageIdToText(v);
  return text === undefined ? undefined : utf8.encode(text);
}

/** ulong, uuid, binary, string: the types part 3, 3.2.11 allows for message-id and correlation-id. */
const MESSAGE_ID_TYPECODES: ReadonlySet<number> = new Set([0x80, 0x53, 0x44, 0x98, 0xa0, 0xb0, 0xa1, 0xb1]);

/** An AMQP message-id as text for Mqgw-Amqp-Message-Id (binary as base64, like a property). */
export function messageIdToText(v: unknown): string | undefined {
  if (isTyped(v)) return MESSAGE_ID_TYPECODES.has(v.type.typecode) ? applicationPropertyToText(v) : undefined;
  return typeof v === "string" || typeof v === "number" || v instanceof Uint8Array
    ? applicationPropertyToText(v)
    : undefined;
}
