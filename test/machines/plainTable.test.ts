import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { PlainTable, plainEqual, plainHash } from "../../src/machines/plainTable.js";

/** The value with every object's keys in one order: equal data gives one JSON text. */
const canonical = (v: unknown): unknown =>
  Array.isArray(v)
    ? v.map(canonical)
    : typeof v === "object" && v !== null
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, canonical((v as Record<string, unknown>)[k])]),
        )
      : v;
const same = (a: unknown, b: unknown) => JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
const plain = fc.jsonValue({ maxDepth: 3 });

describe("plain values as keys (plainTable.ts)", () => {
  it("two plain values are equal exactly when they are the same data, whatever their keys' order", () => {
    fc.assert(
      fc.property(plain, plain, (a, b) => {
        expect(plainEqual(a, b)).toBe(same(a, b));
      }),
    );
  });

  it("a copy is equal and has the same hash", () => {
    fc.assert(
      fc.property(plain, (a) => {
        const copy = structuredClone(a);
        expect(plainEqual(copy, a)).toBe(true);
        expect(plainHash(copy)).toBe(plainHash(a));
      }),
    );
  });

  it.each([
    ["a function", () => ({ f: () => 1 })],
    ["a class instance", () => ({ at: new Date(0) })],
    ["a Buffer", () => Buffer.from("x")],
    ["a Map", () => ({ m: new Map() })],
    ["a value nested too deep", () => ({ a: { b: { c: { d: { e: 1 } } } } })],
  ])("has no hash for %s, and is never equal to another made alike", (_, make) => {
    expect(plainHash(make())).toBeUndefined();
    expect(plainEqual(make(), make())).toBe(false);
  });

  it("tells apart what a plain concatenation or a loose comparison would not", () => {
    for (const [a, b] of [
      [
        ["ab", "c"],
        ["a", "bc"],
      ],
      [{ a: "1" }, { a: 1 }],
      [{ a: undefined }, {}],
      [{ a: null }, { a: undefined }],
      [[1], { 0: 1 }],
    ] as const) {
      expect(plainEqual(a, b)).toBe(false);
      expect(plainHash(a)).not.toBe(plainHash(b));
    }
  });

  it("finds what was kept under an equal key and the same two numbers, and nothing else", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(plain, fc.nat(3), fc.nat(3)), { maxLength: 30 }), plain, (kept, probe) => {
        const table = new PlainTable<number>(1_000, "keep");
        kept.forEach(([key, a, b], i) => {
          const h = table.hash(key, a, b);
          if (h !== undefined && table.get(h, key, a, b) === undefined) table.set(h, key, i, a, b);
        });
        for (const [a, b] of [
          [0, 0],
          [1, 2],
        ] as const) {
          const h = table.hash(probe, a, b) as number;
          const first = kept.findIndex(([key, ka, kb]) => ka === a && kb === b && same(key, probe));
          expect(table.get(h, probe, a, b)).toBe(first === -1 ? undefined : first);
        }
      }),
    );
  });

  it("keeps a frozen copy of the key: the caller's object changing later changes nothing", () => {
    const table = new PlainTable<string>(10, "keep");
    const key = { type: "CONNECT", terms: { keepaliveSec: 60 } };
    const h = table.hash(key) as number;
    table.set(h, key, "kept");
    key.terms.keepaliveSec = 30;
    expect(table.get(h, { type: "CONNECT", terms: { keepaliveSec: 60 } })).toBe("kept");
    expect(table.get(table.hash(key) as number, key)).toBeUndefined();
  });

  it("a key named __proto__ is kept as a key", () => {
    const table = new PlainTable<string>(10, "keep");
    const key = JSON.parse('{"__proto__": {"a": 1}}');
    table.set(table.hash(key) as number, key, "kept");
    expect(table.get(table.hash(key) as number, JSON.parse('{"__proto__": {"a": 1}}'))).toBe("kept");
    expect(table.get(table.hash({}) as number, {})).toBeUndefined();
  });

  it("when full, a clearing table starts again and a keeping one takes no more", () => {
    const clearing = new PlainTable<number>(2, "clear");
    const keeping = new PlainTable<number>(2, "keep");
    for (const t of [clearing, keeping]) for (const k of [1, 2, 3]) t.set(t.hash(k) as number, k, k);
    expect([1, 2, 3].map((k) => clearing.get(clearing.hash(k) as number, k))).toEqual([undefined, undefined, 3]);
    expect([1, 2, 3].map((k) => keeping.get(keeping.hash(k) as number, k))).toEqual([1, 2, undefined]);
  });
});
