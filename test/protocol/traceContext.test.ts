import { MsgHdrsImpl } from "@nats-io/transport-node";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { headPropertiesWithTrace, splitMessage } from "../../src/protocol/amqpBody.js";
import { headersToMeta, metaToHeaders } from "../../src/protocol/headers.js";
import {
  formatTraceparent,
  newTraceparent,
  parseTraceparent,
  traceHeader,
  withTraceparentHeader,
  withTraceparentProperty,
} from "../../src/protocol/traceContext.js";
import { amqpTypes } from "../../src/vendor/rhea.js";

const RUNS = { numRuns: 1000 };
const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

/** A valid version-00 traceparent (ids not all zero). */
const traceparent = fc
  .tuple(
    fc.uint8Array({ minLength: 16, maxLength: 16 }).filter((b) => b.some((x) => x !== 0)),
    fc.uint8Array({ minLength: 8, maxLength: 8 }).filter((b) => b.some((x) => x !== 0)),
    fc.integer({ min: 0, max: 255 }),
  )
  .map(([t, s, flags]) => formatTraceparent({ traceId: hex(t), spanId: hex(s), flags }));

/** What tracestate may hold (W3C: list members of printable ASCII, '%' among them). */
const tracestate = fc
  .array(
    fc.tuple(
      fc.stringMatching(/^[a-z][a-z0-9_\-*/]{0,8}$/),
      fc.stringMatching(/^[\x21-\x2b\x2d-\x3c\x3e-\x7e]{1,12}$/),
    ),
    { minLength: 1, maxLength: 4 },
  )
  .map((members) => members.map(([k, v]) => `${k}=${v}`).join(","));

const otherProps = fc.array(
  fc.tuple(
    fc.string({ minLength: 1, maxLength: 8 }).filter((k) => k !== "traceparent" && k !== "tracestate"),
    fc.string({ maxLength: 8 }),
  ),
  { maxLength: 4 },
);

/** The wire form, then MsgHdrs as a NATS subscriber gets it. */
function viaNats(pairs: Array<[string, string]>): MsgHdrsImpl {
  const h = new MsgHdrsImpl();
  for (const [k, v] of pairs) h.append(k, v);
  return MsgHdrsImpl.decode(h.encode());
}

describe("traceparent, the W3C format", () => {
  it("reads what it writes", () => {
    fc.assert(
      fc.property(traceparent, (tp) => {
        expect(formatTraceparent(parseTraceparent(tp)!)).toBe(tp);
      }),
      RUNS,
    );
  });

  it("refuses what level 1 calls invalid", () => {
    const ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    expect(parseTraceparent(ok)).toEqual({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7",
      flags: 1,
    });
    for (const bad of [
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
      `${ok}-extra`,
      ok.slice(0, 54),
      "",
    ])
      expect(parseTraceparent(bad), bad).toBeUndefined();
    // A later version is read by its first four fields.
    expect(parseTraceparent(`01${ok.slice(2)}-what-comes`)?.spanId).toBe("00f067aa0ba902b7");
  });

  it("a new one is sampled, valid, and its ids are the random bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 24, maxLength: 24 }), (random) => {
        const t = parseTraceparent(newTraceparent(random));
        expect(t).toBeDefined();
        expect(t!.flags).toBe(1);
        if (random.subarray(0, 16).some((b) => b !== 0)) expect(t!.traceId).toBe(hex(random.subarray(0, 16)));
        if (random.subarray(16).some((b) => b !== 0)) expect(t!.spanId).toBe(hex(random.subarray(16)));
      }),
      RUNS,
    );
  });
});

describe("the trace fields between the protocols", () => {
  it("a traceparent/tracestate property is the NATS header of that name, unchanged, and comes back in place", () => {
    fc.assert(
      fc.property(otherProps, traceparent, tracestate, fc.nat(), (others, tp, ts, at) => {
        const userProps: Array<[string, string]> = [...others];
        const i = at % (userProps.length + 1);
        userProps.splice(i, 0, ["traceparent", tp], ["tracestate", ts]);
        const pairs = metaToHeaders({ userProps }, true)!;
        expect(pairs).toContainEqual(["traceparent", tp]);
        expect(pairs).toContainEqual(["tracestate", ts]);
        expect(pairs.some(([k]) => k.toLowerCase().startsWith("mqgw-prop-trace"))).toBe(false);
        const received = viaNats(pairs);
        // A NATS subscriber reads them under their own names, byte for byte.
        expect(received.get("traceparent")).toBe(tp);
        expect(received.get("tracestate")).toBe(ts);
        // MQTT and AMQP receivers get the same properties, in the sender's order.
        expect(headersToMeta(received, true).userProps).toEqual(userProps);
      }),
      RUNS,
    );
  });

  it("a NATS publisher's trace headers, in any case, are the receivers' properties of the standard names", () => {
    fc.assert(
      fc.property(traceparent, tracestate, fc.boolean(), (tp, ts, upper) => {
        const meta = headersToMeta(
          viaNats([
            [upper ? "TraceParent" : "traceparent", tp],
            [upper ? "TRACESTATE" : "tracestate", ts],
            ["Other-Header", "x"],
          ]),
          true,
        );
        expect(meta.userProps).toEqual([
          ["traceparent", tp],
          ["tracestate", ts],
        ]);
      }),
      RUNS,
    );
  });

  it("a value a header cannot hold as is, or a name in another case, stays an ordinary property", () => {
    expect(metaToHeaders({ userProps: [["traceparent", " padded "]] })).toEqual([
      ["Mqgw-Prop-traceparent", "%20padded%20"],
    ]);
    expect(metaToHeaders({ userProps: [["TraceParent", "x"]] })).toEqual([["Mqgw-Prop-TraceParent", "x"]]);
    expect(headersToMeta([["Mqgw-Prop-traceparent", "%20padded%20"]]).userProps).toEqual([["traceparent", " padded "]]);
  });

  it("setting the hop's traceparent replaces every one, keeps the rest in order, and leaves the input alone", () => {
    const pair = fc.tuple(fc.constantFrom("traceparent", "TraceParent", "a", "tracestate", "b"), fc.string());
    fc.assert(
      fc.property(fc.array(pair, { maxLength: 6 }), traceparent, (pairs, tp) => {
        const before = JSON.stringify(pairs);
        const out = withTraceparentHeader(pairs, tp);
        expect(JSON.stringify(pairs)).toBe(before);
        expect(out.filter(([k]) => k.toLowerCase() === "traceparent")).toEqual([["traceparent", tp]]);
        expect(out.filter(([k]) => k.toLowerCase() !== "traceparent")).toEqual(
          pairs.filter(([k]) => k.toLowerCase() !== "traceparent"),
        );
        expect(traceHeader(out, "traceparent")).toBe(tp);
        const props = withTraceparentProperty(pairs, tp);
        expect(props.filter(([k]) => k === "traceparent")).toEqual([["traceparent", tp]]);
        expect(props.filter(([k]) => k !== "traceparent")).toEqual(pairs.filter(([k]) => k !== "traceparent"));
      }),
      RUNS,
    );
  });
});

describe("AMQP message annotations", () => {
  const codec = amqpTypes;
  function head(annotations: Record<string, string>, props: Record<string, string>): Uint8Array {
    const w = new codec.Writer();
    w.write(codec.described(codec.wrap_ulong(0x72), codec.wrap_symbolic_map(annotations)));
    w.write(codec.described(codec.wrap_ulong(0x74), codec.wrap_map(props)));
    w.write(codec.described(codec.wrap_ulong(0x75), codec.wrap_binary(Buffer.from("x"))));
    const parts = splitMessage(w.toBuffer());
    if (!parts.ok || parts.value.head === undefined) throw new Error("no head");
    return parts.value.head;
  }

  it("carry the trace fields the application properties lack, and no other annotation", () => {
    fc.assert(
      fc.property(traceparent, tracestate, fc.boolean(), (tp, ts, inProps) => {
        const h = head(
          { traceparent: tp, tracestate: ts, "x-opt-other": "y" },
          inProps ? { traceparent: "00-11111111111111111111111111111111-2222222222222222-01" } : { a: "1" },
        );
        const props = headPropertiesWithTrace(h);
        expect(props).toContainEqual(["tracestate", ts]);
        expect(props.filter(([k]) => k === "traceparent")).toEqual([
          ["traceparent", inProps ? "00-11111111111111111111111111111111-2222222222222222-01" : tp],
        ]);
        expect(props.some(([k]) => k === "x-opt-other")).toBe(false);
      }),
      { numRuns: 200 },
    );
  });
});
