// A receiver's filter set as rhea reads it off an attach -> the predicate the link
// applies, and the view of an encoded message a filter reads (issue 26 item 3).
import fc from "fast-check";
import rhea from "rhea";
import { describe, expect, it } from "vitest";
import { compileFilterSet, FILTER_LIMITS } from "../../src/protocol/amqpFilterSet.js";
import { filterViewOf } from "../../src/protocol/amqpFilterView.js";

const types = rhea.types as unknown as {
  wrap_described(v: unknown, d: number | string): unknown;
  wrap_symbolic_map(m: Record<string, unknown>): unknown;
  wrap_ubyte(n: number): unknown;
  wrap_long(n: number): unknown;
  Reader: new (b: Buffer) => { read(): unknown };
  Writer: new () => { write(o: unknown): void; toBuffer(): Buffer };
};
/** A filter set as the gateway gets it: encoded by a client, read back by rhea's Reader. */
const wire = (filters: Record<string, unknown>): Record<string, unknown> => {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(filters)) {
    const w = new types.Writer();
    w.write(v);
    out[k] = new types.Reader(w.toBuffer()).read();
  }
  return out;
};
const app = (m: Record<string, unknown>) => types.wrap_described(m, 0x174);
const props = (m: Record<string, unknown>) =>
  types.wrap_described(types.wrap_symbolic_map(m), "amqp:properties-filter");
const message = (m: Record<string, unknown>) => filterViewOf(rhea.message.encode(m as never));

const compiled = (filters: Record<string, unknown>) => {
  const r = compileFilterSet(wire(filters));
  if (!r.ok) throw new Error(r.error.description);
  return r.value;
};
const refusal = (filters: Record<string, unknown>) => {
  const r = compileFilterSet(wire(filters));
  return r.ok ? undefined : r.error;
};

describe("filter set", () => {
  it("application-properties filter: exact, prefix, suffix, && escape, null matches anything, numbers by value", () => {
    const f = compiled({ a: app({ color: "&p:re", site: "&s:lab", tag: "&&x", any: null, n: types.wrap_ubyte(5) }) });
    expect(f?.accepted).toEqual(["a"]);
    const base = { color: "red", site: "the lab", tag: "&x", any: 1, n: types.wrap_long(5) };
    expect(f?.test(message({ application_properties: base }))).toBe(true);
    expect(f?.test(message({ application_properties: { ...base, color: "blue" } }))).toBe(false);
    expect(f?.test(message({ application_properties: { ...base, site: "lab2" } }))).toBe(false);
    expect(f?.test(message({ application_properties: { ...base, tag: "x" } }))).toBe(false);
    expect(f?.test(message({ application_properties: { ...base, n: 6 } }))).toBe(false);
    // A field the filter names must be there (null excepted).
    const { site: _site, ...noSite } = base;
    expect(f?.test(message({ application_properties: noSite }))).toBe(false);
    const { any: _any, ...noAny } = base;
    expect(f?.test(message({ application_properties: noAny }))).toBe(true);
  });

  it("properties filter and a selector: a message passes only when it passes both", () => {
    const f = compiled({
      p: props({ subject: "&p:order.", "content-type": "application/json" }),
      ...rhea.filter.selector("qty > 2"),
    });
    expect(f?.accepted).toEqual(["p", "jms-selector"]);
    const m = (subject: string, qty: number) =>
      message({ subject, content_type: "application/json", application_properties: { qty }, body: "x" });
    expect(f?.test(m("order.created", 3))).toBe(true);
    expect(f?.test(m("order.created", 2))).toBe(false);
    expect(f?.test(m("invoice", 9))).toBe(false);
  });

  it("identity: alike for the same filters however spelt or named, different for others", () => {
    const id = (f: Record<string, unknown>) => compiled(f)?.identity;
    const sel = (s: string, name = "jms-selector") => ({ [name]: types.wrap_described(s, 0x0000468c00000004) });
    expect(id(sel("a = 1 AND b <> 'x'"))).toBe(id(sel("((a=1)) and b != 'x'", "other-name")));
    expect(id(sel("a = 1"))).not.toBe(id(sel("a = 2")));
    expect(id({ x: app({ k: "v", n: 1 }) })).toBe(id({ y: app({ n: 1, k: "v" }) }));
    expect(id({ x: app({ k: "v" }) })).not.toBe(id({ x: app({ k: "&p:v" }) }));
    expect(id({ x: app({ k: "1" }) })).not.toBe(id({ x: app({ k: 1 }) }));
    expect(id({ x: app({ k: "v" }), ...sel("a = 1") })).toBe(id({ ...sel("a = 1", "s"), z: app({ k: "v" }) }));
  });

  it("a filter of a type the gateway does not apply is left out of the answer", () => {
    expect(
      compiled({ other: types.wrap_described("x", "apache.org:legacy-amqp-topic-binding:string") }),
    ).toBeUndefined();
    expect(compiled({ other: types.wrap_described("x", 0x1234), a: app({ k: "v" }) })?.accepted).toEqual(["a"]);
  });

  it("refuses, as amqp:invalid-field and saying which filter, what it cannot apply", () => {
    const many = Object.fromEntries(
      Array.from({ length: FILTER_LIMITS.filters + 1 }, (_, i) => [`f${i}`, app({ k: "v" })]),
    );
    expect(refusal(many)).toMatchObject({
      condition: "amqp:invalid-field",
      description: expect.stringMatching(/9 filters/),
    });
    const wide = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"]));
    expect(refusal({ w: app(wide) })?.description).toMatch(/filter w has 17 fields; the gateway's bound is 16/);
    expect(refusal({ e: app({}) })?.description).toMatch(/filter e is not a map of at least one field/);
    expect(refusal({ p: props({ colour: "x" }) })?.description).toMatch(
      /colour is not a field of the properties section/,
    );
    expect(refusal({ a: app({ k: "&q:x" }) })?.description).toMatch(/not &p:, &s: or &&/);
    expect(refusal({ a: app({ k: [1, 2] }) })?.description).toMatch(/type a filter cannot compare/);
    expect(refusal({ s: types.wrap_described(42, 0x0000468c00000004) })?.description).toMatch(
      /filter s is not a string/,
    );
    expect(refusal({ s: types.wrap_described("a = = 1", "amqp:sql-filter") })?.description).toMatch(
      /^filter s: unexpected =/,
    );
  });
});

describe("filter view", () => {
  it("reads the application properties a sender typed, and the properties, as the receiver gets them", () => {
    const key = fc.stringMatching(/^[a-z]{1,6}$/);
    const value = fc.oneof(fc.string({ maxLength: 6 }), fc.integer(), fc.boolean());
    fc.assert(
      fc.property(fc.dictionary(key, value, { maxKeys: 6 }), fc.string({ maxLength: 8 }), (props, subject) => {
        const v = filterViewOf(rhea.message.encode({ subject, application_properties: props, body: "b" } as never));
        expect(Object.fromEntries(v.application)).toEqual(props);
        expect(v.properties.get("subject")).toBe(subject);
      }),
      { numRuns: 500 },
    );
  });

  it("reads the header's priority and durable, timestamps as milliseconds, and sees nothing in bytes that are no message", () => {
    const v = message({ priority: 7, durable: true, creation_time: new Date(1_700_000_000_000), body: "x" });
    expect(v).toMatchObject({ priority: 7, durable: true });
    expect(v.properties.get("creation-time")).toBe(1_700_000_000_000);
    expect(filterViewOf(new Uint8Array([0x00, 0x53]))).toMatchObject({ priority: undefined, application: new Map() });
  });
});
