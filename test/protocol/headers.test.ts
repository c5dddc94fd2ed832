import { MsgHdrsImpl } from "@nats-io/transport-node";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  answerableReply,
  decodeHeaderBytes,
  decodeHeaderKey,
  decodeHeaderValue,
  encodeHeaderBytes,
  encodeHeaderKey,
  encodeHeaderValue,
  HEADER,
  headersToMeta,
  isStoredCopy,
  type MessageMeta,
  metaToHeaders,
} from "../../src/protocol/headers.js";

const RUNS = { numRuns: 2000 };
const bytes = (s: string) => new TextEncoder().encode(s);

/** What a NATS header line can hold (nats-server ADR-4; nats.js trims values, rejects CR/LF). */
const LEGAL_KEY = /^[\x21-\x39\x3b-\x7e]+$/;
const LEGAL_VALUE = /^(?:[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)?$/;

/** Through nats.js: the wire form, then MsgHdrs as a subscriber gets it (values grouped by key). */
function viaNats(pairs: Array<[string, string]>): MsgHdrsImpl {
  const h = new MsgHdrsImpl();
  for (const [k, v] of pairs) h.append(k, v);
  return MsgHdrsImpl.decode(h.encode());
}

describe("the header table, one example each", () => {
  const cases: Array<[string, MessageMeta, Array<[string, string]>]> = [
    ["Mqgw-QoS 1", { qos: 1 }, [["Mqgw-QoS", "1"]]],
    ["Mqgw-QoS 2", { qos: 2 }, [["Mqgw-QoS", "2"]]],
    ["Mqgw-Content-Type", { contentType: "application/json" }, [["Mqgw-Content-Type", "application/json"]]],
    [
      "Mqgw-Correlation-Id, text bytes stay readable",
      { correlationId: bytes("req-42") },
      [["Mqgw-Correlation-Id", "req-42"]],
    ],
    ["Mqgw-Reply-To", { replyTo: "_INBOX.abc.1" }, [["Mqgw-Reply-To", "_INBOX.abc.1"]]],
    ["Mqgw-Expires", { expiresAt: 1_764_480_000_000 }, [["Mqgw-Expires", "1764480000000"]]],
    ["Mqgw-Prop-<key>", { userProps: [["region", "eu"]] }, [["Mqgw-Prop-region", "eu"]]],
    ["Mqgw-Mqtt-Retain", { mqttRetain: true }, [["Mqgw-Mqtt-Retain", "true"]]],
    ["Mqgw-Mqtt-Client-Id", { mqttClientId: "sensor-7" }, [["Mqgw-Mqtt-Client-Id", "sensor-7"]]],
    ["Mqgw-Mqtt-Payload-Format 1", { mqttPayloadFormat: 1 }, [["Mqgw-Mqtt-Payload-Format", "1"]]],
    [
      "Mqgw-Mqtt-Payload-Format 0 (sent, so v5 receivers see it was set)",
      { mqttPayloadFormat: 0 },
      [["Mqgw-Mqtt-Payload-Format", "0"]],
    ],
    ["Mqgw-Amqp-Message-Id", { amqpMessageId: "ID:host-1:1:1:1" }, [["Mqgw-Amqp-Message-Id", "ID:host-1:1:1:1"]]],
    ["Mqgw-Amqp-Subject", { amqpSubject: "OrderPlaced" }, [["Mqgw-Amqp-Subject", "OrderPlaced"]]],
    ["Mqgw-Amqp-Container-Id", { amqpContainerId: "app-1" }, [["Mqgw-Amqp-Container-Id", "app-1"]]],
    [
      "Mqgw-Amqp-Head, base64",
      { amqpHead: new Uint8Array([0x00, 0x53, 0x70, 0x45]) },
      [["Mqgw-Amqp-Head", "AFNwRQ=="]],
    ],
    ["Mqgw-Amqp-Body", { amqpBody: "sections" }, [["Mqgw-Amqp-Body", "sections"]]],
    [
      "Mqgw-Amqp-Footer, base64",
      { amqpFooter: new Uint8Array([0x00, 0x53, 0x78, 0xc1, 0x01, 0x00]) },
      [["Mqgw-Amqp-Footer", "AFN4wQEA"]],
    ],
  ];
  for (const [name, meta, headers] of cases) {
    it(name, () => {
      expect(metaToHeaders(meta)).toEqual(headers);
      expect(headersToMeta(headers)).toEqual(meta);
    });
  }

  it("Mqgw-Mqtt-Props-Order when a key comes back after another key", () => {
    const userProps: Array<[string, string]> = [
      ["a", "1"],
      ["b", "2"],
      ["a", "3"],
    ];
    expect(metaToHeaders({ userProps }, true)).toEqual([
      ["Mqgw-Prop-a", "1"],
      ["Mqgw-Prop-b", "2"],
      ["Mqgw-Prop-a", "3"],
      ["Mqgw-Mqtt-Props-Order", "a,b,a"],
    ]);
    // nats.js groups the values of a key; the order header rebuilds the sequence.
    expect(headersToMeta(viaNats(metaToHeaders({ userProps }, true)!))).toEqual({ userProps });
  });

  it("Mqgw-Mqtt-Props-Order for User Properties of different keys: a Go map would reorder the keys", () => {
    const userProps: Array<[string, string]> = [
      ["zone", "1"],
      ["2", "x"],
      ["10", "y"],
    ];
    expect(metaToHeaders({ userProps }, true)).toContainEqual([HEADER.mqttPropsOrder, "zone,2,10"]);
    const reordered: Array<[string, string]> = [
      ["Mqgw-Prop-10", "y"],
      ["Mqgw-Prop-2", "x"],
      ["Mqgw-Mqtt-Props-Order", "zone,2,10"],
      ["Mqgw-Prop-zone", "1"],
    ];
    expect(headersToMeta(reordered)).toEqual({ userProps });
  });

  it("no Props-Order for one key (its values keep their order on every hop), nor for AMQP application properties", () => {
    const one: Array<[string, string]> = [
      ["a", "1"],
      ["a", "2"],
    ];
    expect(metaToHeaders({ userProps: one }, true)!.map(([k]) => k)).not.toContain(HEADER.mqttPropsOrder);
    const amqp: Array<[string, string]> = [
      ["a", "1"],
      ["b", "2"],
    ];
    expect(metaToHeaders({ userProps: amqp })!.map(([k]) => k)).not.toContain(HEADER.mqttPropsOrder);
  });

  it("the spec's example: User Property `with space` is Mqgw-Prop-with%20space", () => {
    expect(metaToHeaders({ userProps: [["with space", "x"]] })).toEqual([["Mqgw-Prop-with%20space", "x"]]);
    expect(headersToMeta([["Mqgw-Prop-with%20space", "x"]])).toEqual({ userProps: [["with space", "x"]] });
  });

  it("the spec's nats pub example reads as content type and one property", () => {
    expect(
      headersToMeta([
        ["Mqgw-Content-Type", "application/json"],
        ["Mqgw-Prop-region", "eu"],
      ]),
    ).toEqual({ contentType: "application/json", userProps: [["region", "eu"]] });
  });
});

describe("nothing to send means plain PUB", () => {
  it("an empty meta has no headers", () => expect(metaToHeaders({})).toBeUndefined());
  it("QoS 0 is the absence of Mqgw-QoS", () => expect(metaToHeaders({ qos: 0 })).toBeUndefined());
  it("retain false is not sent", () => expect(metaToHeaders({ mqttRetain: false })).toBeUndefined());
  it("no user properties is not sent", () => expect(metaToHeaders({ userProps: [] })).toBeUndefined());
});

describe("percent-encoding", () => {
  it("writes upper-case hex and always encodes %", () => {
    expect(encodeHeaderValue("100%")).toBe("100%25");
    expect(encodeHeaderValue("é")).toBe("%C3%A9");
    expect(encodeHeaderKey("a:b")).toBe("a%3Ab");
  });
  it("encodes a key's whitespace, controls, ':' and ',' (the Props-Order separator)", () => {
    expect(encodeHeaderKey("a b\tc,d")).toBe("a%20b%09c%2Cd");
  });
  it("keeps inner spaces of a value, encodes the ends that NATS clients trim", () => {
    expect(encodeHeaderValue(" a b ")).toBe("%20a b%20");
    expect(decodeHeaderValue("%20a b%20")).toBe(" a b ");
  });
  it("encodes CR, LF and DEL in values", () => {
    expect(encodeHeaderValue("a\r\nb\x7f")).toBe("a%0D%0Ab%7F");
  });
  it("reads lower-case hex, raw UTF-8 and a % that starts no escape as written", () => {
    expect(decodeHeaderValue("%c3%a9")).toBe("é");
    expect(decodeHeaderValue("é 100% %zz %4")).toBe("é 100% %zz %4");
  });
  it("binary correlation data: printable bytes literal, the rest %XX", () => {
    expect(encodeHeaderBytes(new Uint8Array([0x00, 0x41, 0xff, 0x25]))).toBe("%00A%FF%25");
    expect(decodeHeaderBytes("%00A%FF%25")).toEqual(new Uint8Array([0x00, 0x41, 0xff, 0x25]));
  });
  it("decodeHeaderKey inverts encodeHeaderKey", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary" }), (s) => {
        expect(decodeHeaderKey(encodeHeaderKey(s))).toBe(s);
        expect(decodeHeaderValue(encodeHeaderValue(s))).toBe(s);
      }),
      RUNS,
    );
  });
});

describe("reading headers from NATS publishers", () => {
  it("matches Mqgw-* names without regard to case (canonicalizing clients write Mqgw-Qos)", () => {
    expect(
      headersToMeta([
        ["Mqgw-Qos", "1"],
        ["MQGW-CONTENT-TYPE", "text/plain"],
        ["mqgw-prop-Region", "eu"],
      ]),
    ).toEqual({ qos: 1, contentType: "text/plain", userProps: [["Region", "eu"]] });
  });
  it("accepts MsgHdrs as it is (key -> values)", () => {
    expect(headersToMeta(viaNats([["Mqgw-QoS", "2"]]))).toEqual({ qos: 2 });
  });
  it("ignores other headers and values it cannot read", () => {
    expect(
      headersToMeta([
        ["Trace-Id", "t1"],
        ["Mqgw-QoS", "3"],
        ["Mqgw-Expires", "soon"],
        ["Mqgw-Mqtt-Payload-Format", "2"],
        ["Mqgw-Amqp-Body", "json"],
        ["Mqgw-Unknown", "x"],
      ]),
    ).toEqual({});
  });
  it("takes the first of a repeated single-valued header", () => {
    expect(
      headersToMeta([
        ["Mqgw-QoS", "1"],
        ["Mqgw-QoS", "2"],
      ]),
    ).toEqual({ qos: 1 });
  });
  it("a stale Props-Order loses no property", () => {
    expect(
      headersToMeta([
        ["Mqgw-Prop-a", "1"],
        ["Mqgw-Prop-b", "2"],
        ["Mqgw-Mqtt-Props-Order", "b,zz,b"],
      ]),
    ).toEqual({
      userProps: [
        ["b", "2"],
        ["a", "1"],
      ],
    });
  });
});

// ---------------------------------------------------------------------------------------

const key = fc.oneof(
  fc.string({ unit: "binary", maxLength: 8 }),
  fc.constantFrom("a", "b", "with space", "%", ",", ""),
);
const userProps = fc.array(fc.tuple(key, fc.string({ unit: "binary", maxLength: 12 })), { maxLength: 8 });
const metaArb: fc.Arbitrary<MessageMeta> = fc.record(
  {
    qos: fc.constantFrom(1 as const, 2 as const),
    contentType: fc.string({ unit: "binary" }),
    correlationId: fc.uint8Array({ maxLength: 32 }),
    replyTo: fc.string({ unit: "binary" }),
    expiresAt: fc.integer({ min: 0, max: 2 ** 46 }),
    userProps: userProps.filter((p) => p.length > 0),
    mqttRetain: fc.constant(true),
    mqttClientId: fc.string({ unit: "binary" }),
    mqttPayloadFormat: fc.constantFrom(0 as const, 1 as const),
    amqpMessageId: fc.string({ unit: "binary" }),
    amqpSubject: fc.string({ unit: "binary" }),
    amqpContainerId: fc.string({ unit: "binary" }),
    amqpHead: fc.uint8Array({ maxLength: 64 }),
    amqpBody: fc.constant("sections" as const),
    amqpFooter: fc.uint8Array({ maxLength: 64 }),
  },
  { requiredKeys: [] },
);

/** Uint8Array views and Buffers compare as their bytes. */
const plain = (m: MessageMeta) =>
  JSON.parse(JSON.stringify(m, (_k, v) => (v instanceof Uint8Array ? `bytes:${Buffer.from(v).toString("hex")}` : v)));

describe("properties", () => {
  it("meta -> headers -> meta is the identity", () => {
    fc.assert(
      fc.property(metaArb, (meta) => {
        expect(plain(headersToMeta(metaToHeaders(meta, true) ?? []))).toEqual(plain(meta));
      }),
      RUNS,
    );
  });

  it("... also through nats.js encode, decode and MsgHdrs", () => {
    fc.assert(
      fc.property(metaArb, (meta) => {
        expect(plain(headersToMeta(viaNats(metaToHeaders(meta, true) ?? [])))).toEqual(plain(meta));
      }),
      RUNS,
    );
  });

  it("every key and value is one a NATS header can hold", () => {
    fc.assert(
      fc.property(metaArb, (meta) => {
        for (const [k, v] of metaToHeaders(meta, true) ?? []) {
          expect(k).toMatch(LEGAL_KEY);
          expect(v).toMatch(LEGAL_VALUE);
        }
      }),
      RUNS,
    );
  });

  it("a repeated key keeps its values in order", () => {
    fc.assert(
      fc.property(userProps, key, (props, k) => {
        const out = headersToMeta(viaNats(metaToHeaders({ userProps: props }, true) ?? [])).userProps ?? [];
        const values = (ps: Array<[string, string]>) => ps.filter(([x]) => x === k).map(([, v]) => v);
        expect(values(out)).toEqual(values(props));
      }),
      RUNS,
    );
  });

  it("Props-Order rebuilds the exact sequence, whatever order the headers arrive in", () => {
    fc.assert(
      fc.property(userProps, fc.integer(), (props, seed) => {
        const headers = metaToHeaders({ userProps: props }, true) ?? [];
        // Keys move as groups (a Go map, MsgHdrs); a key's own values keep their order.
        const byKey = new Map<string, Array<[string, string]>>();
        for (const h of headers) byKey.set(h[0], [...(byKey.get(h[0]) ?? []), h]);
        const groups = [...byKey.values()];
        const shuffled = groups
          .map((g, i) => ({ g, r: (Math.imul(i + 1, seed) >>> 0) % 97 }))
          .sort((x, y) => x.r - y.r)
          .flatMap(({ g }) => g);
        const sequence = (ps: Array<[string, string]>) => ps.map(([k, v]) => `${k}=${v}`);
        const rebuilt = headersToMeta(shuffled).userProps ?? [];
        expect(sequence(rebuilt)).toEqual(sequence(props));
      }),
      // A value that is a lone U+FEFF once lost it to the decoder's BOM stripping (found by fast-check).
      {
        ...RUNS,
        examples: [
          [
            [
              ["k", "\ufeff"],
              ["k", "a"],
            ],
            1,
          ],
        ],
      },
    );
  });
});

describe("the NATS reply of a stored message's core copy (mapping-to-nats.md: a stored message keeps it only in Mqgw-Reply-To)", () => {
  const qos = fc.constantFrom(undefined, "0", "1", "2");
  const reply = fc.option(fc.constantFrom("_INBOX.abc.1", "$JS.ACK.X.1", "replies.here"), { nil: undefined });

  it("is not answerable exactly when the message has Mqgw-QoS 1/2 and a Nats-Msg-Id", () => {
    fc.assert(
      fc.property(qos, fc.boolean(), reply, (q, msgId, r) => {
        const pairs: Array<[string, string]> = [];
        if (q !== undefined) pairs.push([HEADER.qos, q]);
        if (msgId) pairs.push(["Nats-Msg-Id", "id-1"]);
        const stored = (q === "1" || q === "2") && msgId;
        expect(isStoredCopy(pairs)).toBe(stored);
        expect(answerableReply(headersToMeta(pairs), r)).toBe(stored ? undefined : r);
      }),
      RUNS,
    );
  });

  it("is read whatever the case of the header's name, and never written back", () => {
    const meta = headersToMeta([
      ["nats-msg-id", "x"],
      ["mqgw-qos", "1"],
    ]);
    expect(meta.hasMsgId).toBe(true);
    expect(answerableReply(meta, "_INBOX.x")).toBeUndefined();
    expect(metaToHeaders(meta)).toEqual([[HEADER.qos, "1"]]);
  });
});
