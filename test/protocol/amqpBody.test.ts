import fc from "fast-check";
import rhea from "rhea";
import { describe, expect, it } from "vitest";
import {
  bodyToPayload,
  headApplicationProperties,
  headSection,
  joinMessage,
  payloadToBody,
  plainDataPayload,
  rheaBodyToSections,
  Section,
  splitMessage,
} from "../../src/protocol/amqpBody.js";
import {
  applicationPropertiesToText,
  applicationPropertyToText,
  float32Text,
  messageIdToBytes,
  messageIdToText,
} from "../../src/protocol/amqpValue.js";
import type { Result } from "../../src/protocol/result.js";

const RUNS = { numRuns: 2000 };
const types = rhea.types as unknown as Record<string, (...a: unknown[]) => unknown> & {
  Reader: new (b: Buffer) => { read(): unknown };
  Writer: new () => { write(o: unknown): void; toBuffer(): Buffer };
};
const hex = (b: Uint8Array) =>
  Buffer.from(b)
    .toString("hex")
    .replace(/(..)(?!$)/g, "$1 ");
const utf8 = (s: string) => new TextEncoder().encode(s);
const value = <T>(r: Result<T, string>): T => {
  if (!r.ok) throw new Error(r.error);
  return r.value;
};
/** A value as rhea's Reader returns it: encoded by rhea, read back, the AMQP type kept. */
const typed = (v: unknown): unknown => {
  const w = new types.Writer();
  w.write(v);
  return new types.Reader(w.toBuffer()).read();
};
const decode = (b: Uint8Array) => rhea.message.decode(Buffer.from(b));

describe("Message bodies (the spec's table)", () => {
  it("data hello -> payload hello", () => {
    const m = rhea.message.encode({ body: rhea.message.data_section(Buffer.from("hello")) });
    const p = value(bodyToPayload(value(splitMessage(m)).body));
    expect(Buffer.from(p.payload).toString()).toBe("hello");
    expect(p.sections).toBe(false);
  });

  it('amqp-value "hello" -> 00 53 77 a1 05 68 65 6c 6c 6f, with Mqgw-Amqp-Body: sections', () => {
    const m = rhea.message.encode({ body: "hello" });
    const p = value(bodyToPayload(value(splitMessage(m)).body));
    expect(hex(p.payload)).toBe("00 53 77 a1 05 68 65 6c 6c 6f");
    expect(p.sections).toBe(true);
  });

  it("several data sections stay AMQP-encoded", () => {
    const m = rhea.message.encode({ body: rhea.message.data_sections([Buffer.from("a"), Buffer.from("b")]) });
    const p = value(bodyToPayload(value(splitMessage(m)).body));
    expect(hex(p.payload)).toBe("00 53 75 a0 01 61 00 53 75 a0 01 62");
    expect(p.sections).toBe(true);
  });

  it("an amqp-sequence stays AMQP-encoded", () => {
    const m = rhea.message.encode({ body: rhea.message.sequence_section([1, "x"]) });
    expect(value(bodyToPayload(value(splitMessage(m)).body)).sections).toBe(true);
  });

  it("a message from MQTT or NATS reaches an AMQP receiver as one data section", () => {
    const body = payloadToBody(utf8("hello"), false);
    expect(hex(body)).toBe("00 53 75 a0 05 68 65 6c 6c 6f");
    const msg = decode(body);
    expect(msg.body.typecode).toBe(Section.data);
    expect(Buffer.from(msg.body.content).toString()).toBe("hello");
  });

  it("a payload over 255 bytes uses vbin32", () => {
    expect(hex(payloadToBody(new Uint8Array(300), false).subarray(0, 8))).toBe("00 53 75 b0 00 00 01 2c");
  });

  it("sections go back as they came", () => {
    const spec = Uint8Array.from([0x00, 0x53, 0x77, 0xa1, 0x05, 0x68, 0x65, 0x6c, 0x6c, 0x6f]);
    expect(payloadToBody(spec, true)).toEqual(spec);
    expect(decode(payloadToBody(spec, true)).body).toBe("hello");
  });

  it("a payload marked as sections that is not AMQP goes as one data section", () => {
    const body = payloadToBody(utf8("{}"), true);
    expect(Buffer.from(decode(body).body.content).toString()).toBe("{}");
  });

  it("a body with no section reads as an empty payload", () => {
    expect(value(bodyToPayload(new Uint8Array()))).toEqual({ payload: new Uint8Array(), sections: false });
    expect(hex(payloadToBody(new Uint8Array(), true))).toBe("00 53 75 a0 00");
  });

  it("rheaBodyToSections encodes a body rhea already decoded", () => {
    expect(hex(rheaBodyToSections("hello"))).toBe("00 53 77 a1 05 68 65 6c 6c 6f");
    expect(hex(rheaBodyToSections(rhea.message.data_section(Buffer.from("hi"))))).toBe("00 53 75 a0 02 68 69");
  });
});

describe("the sender's own sections", () => {
  const full = {
    durable: true,
    delivery_annotations: { "x-hop": "only" },
    message_annotations: { "x-opt-kind": "order" },
    message_id: "m-1",
    subject: "OrderPlaced",
    application_properties: { region: "eu" },
    footer: { sig: "abc" },
    body: "hello",
  };

  it("splits head, body and footer, wherever rhea writes the footer", () => {
    const parts = value(splitMessage(rhea.message.encode(full)));
    expect(hex(parts.body)).toBe("00 53 77 a1 05 68 65 6c 6c 6f");
    expect(decode(parts.footer!).footer).toEqual({ sig: "abc" });
    const head = decode(parts.head!);
    expect(head.durable).toBe(true);
    expect(head.message_annotations).toEqual({ "x-opt-kind": "order" });
    expect(head.subject).toBe("OrderPlaced");
    expect(head.application_properties).toEqual({ region: "eu" });
  });

  it("drops delivery annotations: they are for the next hop only", () => {
    const parts = value(splitMessage(rhea.message.encode(full)));
    expect(decode(joinMessage(parts)).delivery_annotations).toBeUndefined();
  });

  it("drops the empty header and properties sections rhea always writes", () => {
    const parts = value(splitMessage(rhea.message.encode({ body: "x" })));
    expect(parts.head).toBeUndefined();
    expect(parts.footer).toBeUndefined();
  });

  it("join(split(m)) is m as an AMQP receiver reads it", () => {
    const m = rhea.message.encode(full);
    const { delivery_annotations: _, ...expected } = decode(m).toJSON();
    expect(decode(joinMessage(value(splitMessage(m)))).toJSON()).toEqual(expected);
  });

  it("a head or footer that is not such sections is left out", () => {
    const body = payloadToBody(utf8("x"), false);
    expect(joinMessage({ head: utf8("junk"), body, footer: body })).toEqual(body);
  });

  it("refuses bytes that are not message sections", () => {
    expect(splitMessage(Uint8Array.from([0xa1, 0x01, 0x41])).ok).toBe(false); // not described
    expect(splitMessage(Uint8Array.from([0x00, 0x53, 0x77, 0xa1, 0x09, 0x41])).ok).toBe(false); // truncated
    expect(splitMessage(Uint8Array.from([0x00, 0x53, 0x10, 0x40])).ok).toBe(false); // no such section
    expect(splitMessage(Uint8Array.from([0x00, 0x53, 0x75, 0xa1, 0x01, 0x41])).ok).toBe(false); // data not binary
    expect(splitMessage(Uint8Array.from([0xff])).ok).toBe(false); // no such type
  });

  it("reads application properties from the head with their AMQP types", () => {
    const m = rhea.message.encode({
      application_properties: {
        region: "eu",
        id: types.wrap_uuid(Buffer.from("0123456789abcdef0123456789abcdef", "hex")),
        blob: types.wrap_binary(Buffer.from([1, 2, 3])),
        n: 7,
        gone: null,
      },
      body: "x",
    });
    expect(headApplicationProperties(value(splitMessage(m)).head!)).toEqual([
      ["region", "eu"],
      ["id", "01234567-89ab-cdef-0123-456789abcdef"],
      ["blob", "AQID"],
      ["n", "7"],
    ]);
  });

  it("gives the bridge a head section's typed value", () => {
    const head = value(splitMessage(rhea.message.encode({ message_id: "m-1", body: "x" }))).head!;
    const props = headSection(head, Section.properties) as { value: Array<{ value: unknown }> };
    expect(props.value[0]!.value).toBe("m-1");
    expect(headSection(head, Section.header)).toBeUndefined();
  });
});

describe("application properties as text (the spec's rules)", () => {
  const cases: Array<[string, unknown, string | undefined]> = [
    ["string as is", types.wrap_string("eu west"), "eu west"],
    ["symbol as text", types.wrap_symbol("sym"), "sym"],
    ["int: decimal", types.wrap_int(-42), "-42"],
    ["ubyte: decimal", types.wrap_ubyte(255), "255"],
    ["uint0: decimal", types.wrap_uint(0), "0"],
    ["long: decimal", types.wrap_long(-5_000_000_000), "-5000000000"],
    [
      "ulong past 2^53: exact decimal",
      types.wrap_ulong(Buffer.from("ffffffffffffffff", "hex")),
      "18446744073709551615",
    ],
    ["long min: exact decimal", types.wrap_long(Buffer.from("8000000000000000", "hex")), "-9223372036854775808"],
    ["double: decimal", types.wrap_double(1.5), "1.5"],
    ["float: the float's own shortest decimal", types.wrap_float(0.1), "0.1"],
    ["boolean true", types.wrap_boolean(true), "true"],
    ["boolean false", types.wrap_boolean(false), "false"],
    ["boolean in its one-byte form", types.Boolean!(1), "true"],
    ["timestamp: Unix milliseconds", types.wrap_timestamp(1_764_480_000_123), "1764480000123"],
    [
      "uuid: canonical form",
      types.wrap_uuid(Buffer.from("0123456789ABCDEF0123456789ABCDEF", "hex")),
      "01234567-89ab-cdef-0123-456789abcdef",
    ],
    ["binary: base64", types.wrap_binary(Buffer.from("hello")), "aGVsbG8="],
    ["char: the character", types.wrap_char(0x1f600), "😀"],
    ["null: dropped", types.Null!(), undefined],
    ["decimal32: dropped", types.Decimal32!(Buffer.alloc(4)), undefined],
    ["decimal64: dropped", types.Decimal64!(Buffer.alloc(8)), undefined],
    ["decimal128: dropped", types.Decimal128!(Buffer.alloc(16)), undefined],
    ["list: dropped", types.wrap_list([1, 2]), undefined],
    ["empty list: dropped", types.wrap_list([]), undefined],
    ["map: dropped", types.wrap_map({ a: 1 }), undefined],
    ["array: dropped", types.wrap_array([1, 2], 0x71), undefined],
    ["described: dropped", types.wrap_described("x", 0x1234), undefined],
  ];
  for (const [name, v, text] of cases) {
    it(name, () => expect(applicationPropertyToText(typed(v))).toBe(text));
  }

  it("plain values, as rhea's own decoding gives them", () => {
    expect(
      applicationPropertiesToText({
        s: "a",
        n: 1.25,
        b: false,
        t: new Date(5),
        bin: Buffer.from([255]),
        z: null,
        l: [1],
        m: {},
      }),
    ).toEqual([
      ["s", "a"],
      ["n", "1.25"],
      ["b", "false"],
      ["t", "5"],
      ["bin", "/w=="],
    ]);
  });

  it("float32Text is the shortest decimal that reads back as the same float", () => {
    fc.assert(
      fc.property(fc.float({ noNaN: true }), (f) => {
        // -0 reads as "0", as String(-0) does.
        expect(Math.fround(Number(float32Text(f))) === f).toBe(true);
      }),
      RUNS,
    );
  });

  it("message-id and correlation-id: text, and bytes for Mqgw-Correlation-Id", () => {
    expect(messageIdToText(typed(types.wrap_ulong(7)))).toBe("7");
    expect(messageIdToText(typed(types.wrap_string("ID:1")))).toBe("ID:1");
    expect(messageIdToText(typed(types.wrap_list([1])))).toBeUndefined();
    expect(messageIdToBytes(typed(types.wrap_string("req-1")))).toEqual(utf8("req-1"));
    expect(Buffer.from(messageIdToBytes(typed(types.wrap_binary(Buffer.from([0, 1]))))!)).toEqual(Buffer.from([0, 1]));
    expect(Buffer.from(messageIdToBytes(typed(types.wrap_uuid(Buffer.alloc(16))))!).toString()).toBe(
      "00000000-0000-0000-0000-000000000000",
    );
  });
});

// ---------------------------------------------------------------------------------------

/** Values rhea writes and reads back as the same JavaScript value. */
const amqpValue = fc.letrec((tie) => ({
  v: fc.oneof(
    { depthSize: "small" },
    fc.string({ unit: "binary" }),
    fc.integer(),
    fc.boolean(),
    fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Number.isInteger(d)),
    fc.array(tie("v"), { maxLength: 4 }),
  ),
})).v;

describe("properties", () => {
  it("payload -> body -> payload is the identity", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), (p) => {
        const back = value(bodyToPayload(payloadToBody(p, false)));
        expect(back.sections).toBe(false);
        expect(Buffer.from(back.payload)).toEqual(Buffer.from(p));
      }),
      RUNS,
    );
  });

  it("amqp-value -> sections payload -> body reads as the same value", () => {
    fc.assert(
      fc.property(amqpValue, (v) => {
        const m = rhea.message.encode({ body: v });
        const { payload, sections } = value(bodyToPayload(value(splitMessage(m)).body));
        expect(sections).toBe(true);
        expect(decode(payloadToBody(payload, sections)).body).toEqual(v);
      }),
      RUNS,
    );
  });

  it("split then join keeps every section an AMQP receiver reads", () => {
    fc.assert(
      fc.property(
        amqpValue,
        fc.dictionary(fc.string({ minLength: 1, maxLength: 6 }), fc.oneof(fc.string(), fc.integer(), fc.boolean()), {
          maxKeys: 4,
        }),
        fc.option(fc.string({ minLength: 1 }), { nil: undefined }),
        (body, props, subject) => {
          const m = rhea.message.encode({ body, application_properties: props, subject, footer: props });
          const parts = value(splitMessage(m));
          const { payload, sections } = value(bodyToPayload(parts.body));
          const back = joinMessage({ ...parts, body: payloadToBody(payload, sections) });
          // An empty map or an all-null list carries nothing, so it is not kept.
          const said = Object.entries(decode(m).toJSON()).filter(
            ([k, x]) => !((k === "application_properties" || k === "footer") && Object.keys(x).length === 0),
          );
          expect(decode(back).toJSON()).toEqual(Object.fromEntries(said));
        },
      ),
      RUNS,
    );
  });
});

describe("plainDataPayload: the one-data-section message read from its bytes", () => {
  const described = (code: number, v: unknown) => types.described!(types.wrap_ulong!(code), v);
  const section = fc.oneof(
    fc.constant(described(Section.header, types.wrap_list!([]))),
    fc.constant(described(Section.properties, types.wrap_list!([]))),
    fc
      .string()
      .map((to) =>
        described(Section.properties, types.wrap_list!([types.Null!(), types.Null!(), types.wrap_string!(to)])),
      ),
    fc.uint8Array({ maxLength: 400 }).map((b) => described(Section.data, types.wrap_binary!(Buffer.from(b)))),
    fc.string().map((v) => described(Section.amqpValue, types.wrap_string!(v))),
    fc.constant(described(Section.footer, types.wrap_map!({ k: "v" }))),
  );
  const encodeAll = (sections: unknown[]) => {
    const w = new types.Writer();
    for (const s of sections) w.write(s);
    return new Uint8Array(w.toBuffer());
  };

  it("is the payload splitMessage and bodyToPayload find, or leaves the message to them", () => {
    fc.assert(
      fc.property(fc.array(section, { maxLength: 4 }), (sections) => {
        const bytes = encodeAll(sections);
        const plain = plainDataPayload(bytes);
        if (plain === undefined) return;
        const parts = splitMessage(bytes);
        expect(parts.ok).toBe(true);
        if (!parts.ok) return;
        expect(parts.value.head).toBeUndefined();
        expect(parts.value.footer).toBeUndefined();
        const body = bodyToPayload(parts.value.body);
        expect(body).toEqual({ ok: true, value: { payload: plain, sections: false } });
      }),
      RUNS,
    );
  });

  it("reads what rhea writes for a data-section body, short or long", () => {
    for (const n of [0, 1, 255, 256, 70_000]) {
      const data = Buffer.alloc(n, 7);
      const bytes = rhea.message.encode({ body: rhea.message.data_section(data) } as never);
      expect(Buffer.from(plainDataPayload(bytes)!)).toEqual(data);
    }
  });
});
