/**
 * What a filter reads of a message (docs/decisions/amqp-filters.md): its header's
 * priority and durable, its properties and its application properties, read from the
 * encoded message the receiver would get (so a filter sees exactly what the receiver
 * sees, whichever protocol sent it). Reading stops at the body. Pure.
 */
import rhea from "rhea";
import type { PropertyName } from "./amqpSelector.js";
import { PROPERTY_NAMES } from "./amqpSelector.js";
import { isTyped, type TypedValue } from "./amqpValue.js";

/** A value a filter compares: text (string or symbol), a number, a boolean, or bytes (binary, uuid). */
export type FilterValue = string | number | boolean | Uint8Array;

export interface FilterView {
  readonly priority: number | undefined;
  readonly durable: boolean | undefined;
  readonly properties: ReadonlyMap<PropertyName, FilterValue>;
  readonly application: ReadonlyMap<string, FilterValue>;
}

const codec = rhea.types as unknown as { Reader: new (b: Buffer) => { position: number; read(): TypedValue } };

const HEADER = 0x70;
const PROPERTIES = 0x73;
const APPLICATION = 0x74;
/** data, amqp-sequence, amqp-value, footer: nothing a filter reads comes after these. */
const BODY_OR_LATER = new Set([0x75, 0x76, 0x77, 0x78]);
const BY_SYMBOL: ReadonlyMap<string, number> = new Map([
  ["amqp:header:list", HEADER],
  ["amqp:properties:list", PROPERTIES],
  ["amqp:application-properties:map", APPLICATION],
  ["amqp:data:binary", 0x75],
  ["amqp:amqp-sequence:list", 0x76],
  ["amqp:amqp-value:*", 0x77],
  ["amqp:value:*", 0x77],
  ["amqp:footer:map", 0x78],
]);

/** A (u)long past 2^53 as rhea gives it: 8 big-endian bytes. */
function longOf(b: Uint8Array, signed: boolean): number {
  const view = new DataView(b.buffer, b.byteOffset, 8);
  return Number(signed ? view.getBigInt64(0) : view.getBigUint64(0));
}

/**
 * rhea's Reader value (Typed) or a plain one -> a FilterValue; undefined for null and
 * for types a filter cannot compare (decimal, list, map, array, described).
 */
export function filterValueOf(v: unknown): FilterValue | undefined {
  if (!isTyped(v)) {
    if (typeof v === "string" || typeof v === "boolean" || typeof v === "number") return v;
    if (v instanceof Date) return v.getTime();
    if (v instanceof Uint8Array) return v;
    return undefined;
  }
  const code = v.type.typecode;
  const x = v.value;
  if (v.descriptor !== undefined) return undefined;
  switch (code) {
    case 0x41:
      return true;
    case 0x42:
      return false;
    case 0x56:
      return x === true || x === 1;
    case 0x43:
    case 0x44:
      return 0;
    case 0x80:
    case 0x81:
      return x instanceof Uint8Array ? longOf(x, code === 0x81) : (x as number);
    case 0x50:
    case 0x51:
    case 0x52:
    case 0x53:
    case 0x54:
    case 0x55:
    case 0x60:
    case 0x61:
    case 0x70:
    case 0x71:
    case 0x72:
    case 0x82:
      return typeof x === "number" ? x : undefined;
    case 0x83:
      return x instanceof Date ? x.getTime() : typeof x === "number" ? x : undefined;
    case 0x98:
    case 0xa0:
    case 0xb0:
      return x instanceof Uint8Array ? x : undefined;
    case 0xa1:
    case 0xb1:
    case 0xa3:
    case 0xb3:
      return typeof x === "string" ? x : undefined;
    default:
      return undefined;
  }
}

/** The key/value pairs of a map as the Reader gives it (a flat array of keys and values). */
export function mapEntries(v: unknown): Array<[unknown, unknown]> {
  const items = isTyped(v) ? v.value : v;
  const out: Array<[unknown, unknown]> = [];
  if (Array.isArray(items)) for (let i = 0; i + 1 < items.length; i += 2) out.push([items[i], items[i + 1]]);
  return out;
}

const EMPTY: FilterView = { priority: undefined, durable: undefined, properties: new Map(), application: new Map() };

/** The view of an encoded message; a message that does not parse is seen as having no fields. */
export function filterViewOf(encoded: Uint8Array): FilterView {
  const buf = Buffer.from(encoded.buffer, encoded.byteOffset, encoded.byteLength);
  const reader = new codec.Reader(buf);
  let priority: number | undefined;
  let durable: boolean | undefined;
  const properties = new Map<PropertyName, FilterValue>();
  const application = new Map<string, FilterValue>();
  try {
    while (reader.position < buf.length) {
      const section = reader.read();
      if (reader.position > buf.length) break;
      const d = isTyped(section.descriptor) ? section.descriptor.value : undefined;
      const code = typeof d === "number" ? d : typeof d === "string" ? BY_SYMBOL.get(d) : undefined;
      if (code === undefined || BODY_OR_LATER.has(code)) break;
      const items = section.value;
      if (code === HEADER && Array.isArray(items)) {
        const dur = filterValueOf(items[0]);
        const pri = filterValueOf(items[1]);
        durable = typeof dur === "boolean" ? dur : undefined;
        priority = typeof pri === "number" ? pri : undefined;
      } else if (code === PROPERTIES && Array.isArray(items)) {
        PROPERTY_NAMES.forEach((name, i) => {
          const v = filterValueOf(items[i]);
          if (v !== undefined) properties.set(name, v);
        });
      } else if (code === APPLICATION) {
        for (const [k, val] of mapEntries(section)) {
          const key = filterValueOf(k);
          const v = filterValueOf(val);
          if (typeof key === "string" && v !== undefined && !application.has(key)) application.set(key, v);
        }
      }
    }
  } catch {
    return EMPTY;
  }
  return { priority, durable, properties, application };
}
