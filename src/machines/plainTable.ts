/**
 * A bounded table keyed by plain values (strings, numbers, booleans, null, undefined, plain
 * objects and arrays of them), found by a hash and an equality walk: a lookup builds no key
 * and allocates nothing. Machine steps are reused by what they were taken from
 * (stepMemo.ts), and a key string built per step was 6 % of what a reconnect storm
 * allocated (docs/performance.md).
 */

/** Nested plain values deeper than this are not worth a key. */
const MAX_DEPTH = 4;
const SEED = 0x811c9dc5;
const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);

function mix(h: number, x: number): number {
  return Math.imul(h ^ x, 0x01000193);
}

function hashString(s: string, h: number): number {
  h = mix(mix(h, 1), s.length);
  for (let i = 0; i < s.length; i++) h = mix(h, s.charCodeAt(i));
  return h;
}

/** A 32-bit hash of a plain value, continuing from `h`; undefined for anything else (a function, a class instance, a Buffer, a Map). */
export function plainHash(value: unknown, h = SEED, depth = 0): number | undefined {
  switch (typeof value) {
    case "string":
      return hashString(value, h);
    case "number":
      f64[0] = value;
      return mix(mix(mix(h, 2), u32[0] as number), u32[1] as number);
    case "boolean":
      return mix(h, value ? 3 : 4);
    case "undefined":
      return mix(h, 5);
    case "object": {
      if (value === null) return mix(h, 6);
      if (depth >= MAX_DEPTH) return undefined;
      if (Array.isArray(value)) {
        h = mix(mix(h, 7), value.length);
        for (let i = 0; i < value.length; i++) {
          const next = plainHash(value[i], h, depth + 1);
          if (next === undefined) return undefined;
          h = next;
        }
        return h;
      }
      if (Object.getPrototypeOf(value) !== Object.prototype) return undefined;
      h = mix(h, 8);
      for (const name in value) {
        const next = plainHash((value as Record<string, unknown>)[name], hashString(name, h), depth + 1);
        if (next === undefined) return undefined;
        h = next;
      }
      return mix(h, 9);
    }
    default:
      return undefined;
  }
}

/** Two plain values equal as data: the same primitives, arrays alike, objects with the same own keys (in any order) alike. */
export function plainEqual(a: unknown, b: unknown, depth = 0): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null || depth >= MAX_DEPTH) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!plainEqual(a[i], b[i], depth + 1)) return false;
    return true;
  }
  if (Object.getPrototypeOf(a) !== Object.prototype || Object.getPrototypeOf(b) !== Object.prototype) return false;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  let keys = 0;
  for (const name in x) {
    if (!Object.hasOwn(y, name) || !plainEqual(x[name], y[name], depth + 1)) return false;
    keys++;
  }
  for (const _ in y) keys--;
  return keys === 0;
}

/** A frozen copy of a plain value: what a table keeps, out of reach of the caller's object. */
function frozenCopy(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) return Object.freeze(value.map(frozenCopy));
  const out: Record<string, unknown> = {};
  // Defined, not assigned: a key named "__proto__" stays a key.
  for (const name in value)
    Object.defineProperty(out, name, {
      value: frozenCopy((value as Record<string, unknown>)[name]),
      enumerable: true,
    });
  return Object.freeze(out);
}

interface Slot<V> {
  readonly a: number;
  readonly b: number;
  readonly key: unknown;
  readonly value: V;
}

/**
 * Values under a plain key and two numbers (ids the caller gives, compared exactly): at most
 * `limit` of them. When full, `full` says whether the table is cleared (its hot keys come
 * back at once) or takes no more.
 */
export class PlainTable<V> {
  private readonly slots = new Map<number, Slot<V>[]>();
  private size = 0;

  constructor(
    private readonly limit: number,
    private readonly full: "clear" | "keep",
  ) {}

  /** The key's hash with `a` and `b`, undefined when the key is not plain (nothing is kept under it). */
  hash(key: unknown, a = 0, b = 0): number | undefined {
    return plainHash(key, mix(mix(SEED, a), b));
  }

  /** What was kept under an equal key, given the key's `hash` with `a` and `b`. */
  get(hash: number, key: unknown, a = 0, b = 0): V | undefined {
    const slots = this.slots.get(hash);
    if (slots === undefined) return undefined;
    for (const slot of slots) if (slot.a === a && slot.b === b && plainEqual(slot.key, key)) return slot.value;
    return undefined;
  }

  /** Keeps `value` under a frozen copy of `key`. */
  set(hash: number, key: unknown, value: V, a = 0, b = 0): void {
    if (this.size >= this.limit) {
      if (this.full === "keep") return;
      this.slots.clear();
      this.size = 0;
    }
    const slot = { a, b, key: frozenCopy(key), value };
    const slots = this.slots.get(hash);
    if (slots === undefined) this.slots.set(hash, [slot]);
    else slots.push(slot);
    this.size++;
  }
}
