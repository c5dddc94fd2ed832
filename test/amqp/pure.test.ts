// The pure parts of the AMQP door: the frame guard, the message mappings both ways, the
// source rules and the SASL PLAIN reading, without sockets.
import type { ConsumerInfo } from "@nats-io/jetstream";
import fc from "fast-check";
import rhea from "rhea";
import { describe, expect, it } from "vitest";
import { FrameGuard, type GuardNote, SASL_HEADER } from "../../src/actors/amqp/frameGuard.js";
import { amqpToNats, type InboundContext } from "../../src/actors/amqp/inbound.js";
import { redeliveriesOf } from "../../src/actors/amqp/jsFeed.js";
import { natsToAmqp, withDeliveryCount } from "../../src/actors/amqp/outbound.js";
import { plainLogin } from "../../src/actors/amqp/sasl.js";
import { durableConsumerName, durableSource, planSource, queueProblem } from "../../src/actors/amqp/sources.js";
import type { Coverage } from "../../src/actors/bindings.js";
import { parseTemplate } from "../../src/protocol/route.js";

const AMQP = (id: number) => Buffer.from([0x41, 0x4d, 0x51, 0x50, id, 1, 0, 0]);

function frame(size: number, type: number, channel = 0): Buffer {
  const b = Buffer.alloc(size);
  b.writeUInt32BE(size, 0);
  b[4] = 2;
  b[5] = type;
  b.writeUInt16BE(channel, 6);
  return b;
}

const limits = { maxFrameSize: 1024, channelMax: 10, plainHeaderAllowed: true };

describe("FrameGuard", () => {
  it("follows SASL, then the AMQP header, then AMQP frames", () => {
    const g = new FrameGuard(limits);
    const stream = Buffer.concat([AMQP(3), frame(40, 1), frame(30, 1), AMQP(0), frame(100, 0), frame(8, 0, 10)]);
    expect(g.scan(stream)).toEqual([{ kind: "header", sasl: true }]);
  });

  it("says the same whatever the chunking", () => {
    const stream = Buffer.concat([AMQP(3), frame(40, 1), AMQP(0), frame(100, 0), frame(2048, 0)]);
    const whole = new FrameGuard(limits).scan(stream);
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: stream.length - 1 }), { maxLength: 12 }), (cuts) => {
        const g = new FrameGuard(limits);
        const notes: GuardNote[] = [];
        let at = 0;
        for (const cut of [...new Set(cuts)].sort((a, b) => a - b).concat(stream.length)) {
          notes.push(...g.scan(stream.subarray(at, cut)));
          at = cut;
        }
        expect(notes).toEqual(whole);
      }),
    );
    expect(whole.at(-1)).toMatchObject({ kind: "violation", condition: "amqp:connection:framing-error" });
  });

  it.each([
    ["a frame over max-frame-size", Buffer.concat([AMQP(0), frame(2000, 0)])],
    ["a channel over channel-max", Buffer.concat([AMQP(0), frame(8, 0, 11)])],
    ["a frame shorter than its header", Buffer.concat([AMQP(0), Buffer.from([0, 0, 0, 4, 2, 0, 0, 0])])],
    ["an AMQP frame inside SASL", Buffer.concat([AMQP(3), frame(8, 0)])],
  ])("refuses %s", (_what, bytes) => {
    expect(new FrameGuard(limits).scan(bytes).at(-1)).toMatchObject({
      kind: "violation",
      condition: "amqp:connection:framing-error",
    });
  });

  it.each([
    ["HTTP", Buffer.from("GET / HTTP/1.1\r\n")],
    ["AMQP 0-9-1", Buffer.from([0x41, 0x4d, 0x51, 0x50, 0, 0, 9, 1])],
    ["TLS", AMQP(2)],
  ])("answers a %s header with the SASL header", (_what, bytes) => {
    expect(new FrameGuard(limits).scan(bytes)).toEqual([
      expect.objectContaining({ kind: "bad_header", answer: SASL_HEADER }),
    ]);
  });

  it("answers the plain AMQP header with the SASL header when ANONYMOUS is not offered", () => {
    const g = new FrameGuard({ ...limits, plainHeaderAllowed: false });
    expect(g.scan(AMQP(0))).toEqual([expect.objectContaining({ kind: "bad_header" })]);
  });

  it("reads nothing after a violation", () => {
    const g = new FrameGuard(limits);
    g.scan(Buffer.concat([AMQP(0), frame(2000, 0)]));
    expect(g.scan(AMQP(3))).toEqual([]);
  });
});

const ctx = (over: Partial<InboundContext> = {}): InboundContext => ({
  target: "orders.eu",
  settled: false,
  containerId: "c1",
  routes: new Map(),
  routeList: [],
  now: 1_000,
  ...over,
});

const encode = (m: Record<string, unknown>) => rhea.message.encode(m as never);

describe("AMQP message -> NATS", () => {
  it("one data section is the payload; the sender's sections go in headers", () => {
    const r = amqpToNats(
      encode({ body: rhea.message.data_section(Buffer.from("hi")), ttl: 5_000, application_properties: { a: 1 } }),
      ctx(),
    );
    expect(r.ok && Buffer.from(r.value.payload).toString()).toBe("hi");
    const h = Object.fromEntries(r.ok ? r.value.headers! : []);
    expect(h).toMatchObject({
      "Mqgw-QoS": "1",
      "Mqgw-Expires": "6000",
      "Mqgw-Prop-a": "1",
      "Mqgw-Amqp-Container-Id": "c1",
    });
    expect(h["Mqgw-Amqp-Head"]).toBeDefined();
  });

  it("the relay takes `to`, refuses what a target refuses", () => {
    expect(amqpToNats(encode({ to: "a.b", body: "x" }), ctx({ target: null }))).toMatchObject({
      ok: true,
      value: { subject: "a.b" },
    });
    expect(amqpToNats(encode({ to: "a.>", body: "x" }), ctx({ target: null }))).toMatchObject({
      ok: false,
      error: { condition: "amqp:invalid-field" },
    });
    expect(amqpToNats(encode({ body: "x" }), ctx({ target: null }))).toMatchObject({
      ok: false,
      error: { condition: "amqp:invalid-field" },
    });
    expect(amqpToNats(encode({ to: "$MQG.x", body: "x" }), ctx({ target: null }))).toMatchObject({
      ok: false,
      error: { condition: "amqp:unauthorized-access" },
    });
  });

  it("routes build the subject or name the missing property", () => {
    const template = parseTemplate("orders.{region}");
    if (!template.ok) throw new Error(template.error);
    const route = { subject: "orders", template: template.value };
    const c = ctx({ target: "orders", routes: new Map([["orders", route]]), routeList: [route] });
    expect(amqpToNats(encode({ body: "x", application_properties: { region: "a.b" } }), c)).toMatchObject({
      ok: true,
      value: { subject: "orders.a%2Eb" },
    });
    const missing = amqpToNats(encode({ body: "x" }), c);
    expect(missing).toMatchObject({
      ok: false,
      error: { condition: "amqp:precondition-failed", description: "route property missing: region" },
    });
  });

  it("a plain data-section message's headers say its own link's settle mode and container, link after link", () => {
    const plain = encode({ body: rhea.message.data_section(Buffer.from("p")) });
    const seen = [
      ctx({ settled: true, containerId: "a" }),
      ctx({ settled: false, containerId: "a" }),
      ctx({ settled: false, containerId: "b" }),
      ctx({ settled: true, containerId: "a" }),
    ].map((c) => {
      const r = amqpToNats(plain, c);
      return r.ok ? { headers: r.value.headers, payload: Buffer.from(r.value.payload).toString() } : r;
    });
    expect(seen).toEqual([
      { headers: [["Mqgw-Amqp-Container-Id", "a"]], payload: "p" },
      {
        headers: [
          ["Mqgw-QoS", "1"],
          ["Mqgw-Amqp-Container-Id", "a"],
        ],
        payload: "p",
      },
      {
        headers: [
          ["Mqgw-QoS", "1"],
          ["Mqgw-Amqp-Container-Id", "b"],
        ],
        payload: "p",
      },
      { headers: [["Mqgw-Amqp-Container-Id", "a"]], payload: "p" },
    ]);
  });

  it("a reply-to that is not a subject is not passed on as one", () => {
    const r = amqpToNats(encode({ body: "x", reply_to: "not a subject" }), ctx());
    expect(r).toMatchObject({ ok: true, value: { reply: undefined } });
  });

  it("bytes that are not a message are a decode error", () => {
    expect(amqpToNats(Buffer.from([1, 2, 3]), ctx())).toMatchObject({
      ok: false,
      error: { condition: "amqp:decode-error" },
    });
  });
});

describe("NATS message -> AMQP", () => {
  // rhea's own decoder, as a client reads it (this process never loads the gateway's rhea patches).
  const decode = (b: Uint8Array) =>
    (rhea.message as unknown as { decode(b: Buffer): Record<string, unknown> }).decode(Buffer.from(b));

  it("plain NATS: one data section, `to`, properties from the headers", () => {
    const m = decode(
      natsToAmqp(
        "a.b",
        [
          ["Mqgw-Content-Type", "text/plain"],
          ["Mqgw-Correlation-Id", "%00%01"],
          ["Mqgw-Expires", "99"],
        ],
        Buffer.from("x"),
        "r.s",
      ),
    );
    expect(m).toMatchObject({ to: "a.b", reply_to: "r.s", content_type: "text/plain" });
    expect(Buffer.isBuffer(m.correlation_id)).toBe(true);
    expect((m.absolute_expiry_time as Date).getTime()).toBe(99);
  });

  it("a message with only a subject and a payload is what rhea writes for it, any subject and size", () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.constant(""), fc.string({ unit: "grapheme", maxLength: 300 })),
        fc.uint8Array({ maxLength: 700 }),
        fc.constantFrom(undefined, [["Mqgw-Amqp-Container-Id", "c1"]] as Array<[string, string]>),
        (subject, data, headers) => {
          const ours = Buffer.from(natsToAmqp(subject, headers, data, undefined));
          const theirs = Buffer.from(
            rhea.message.encode({ to: subject, body: rhea.message.data_section(Buffer.from(data)) } as never),
          );
          expect(decode(ours)).toEqual(decode(theirs));
        },
      ),
      { numRuns: 1000 },
    );
  });

  it("a redelivery sets delivery-count and first-acquirer, keeping the rest of the sender's header", () => {
    const head = Buffer.from(rhea.message.encode({ durable: true, priority: 7, to: "x" } as never));
    const m = decode(
      Buffer.concat([
        Buffer.from(withDeliveryCount(head, 3)),
        Buffer.from(rhea.message.encode({ body: "b" } as never)).subarray(0),
      ]),
    );
    expect(m).toMatchObject({ durable: true, priority: 7, delivery_count: 3, first_acquirer: false, to: "x" });
  });

  it("reads the delivery count from both ack subject formats", () => {
    expect(redeliveriesOf("$JS.ACK.S.C.1.5.5.123.0")).toBe(0);
    expect(redeliveriesOf("$JS.ACK.S.C.3.5.5.123.0")).toBe(2);
    expect(redeliveriesOf("$JS.ACK.domain.hash.S.C.2.5.5.123.0.tok")).toBe(1);
  });
});

describe("sources", () => {
  const stored: Coverage = { kind: "stored", stream: { stream: "S", account: null, subjects: ["a.>"] } };
  const unstored: Coverage = { kind: "unstored" };
  const mixed: Coverage = { kind: "mixed", reason: "spans" };

  it.each([
    ["exact, settled", { kind: "subject", subject: "a.b" }, 1, unstored, { kind: "core", settled: true }],
    [
      "exact, unsettled, unstored: live",
      { kind: "subject", subject: "a.b" },
      0,
      unstored,
      { kind: "core", settled: false },
    ],
    [
      "exact, mixed, stored: the stream",
      { kind: "subject", subject: "a.b" },
      2,
      stored,
      { kind: "stream", stream: "S" },
    ],
    [
      "wildcard, mixed, unstored: presettled",
      { kind: "wildcard", subject: "a.*" },
      2,
      unstored,
      { kind: "core", settled: true },
    ],
    ["wildcard, unsettled, stored: the stream", { kind: "wildcard", subject: "a.*" }, 0, stored, { kind: "stream" }],
    ["wildcard, unsettled, unstored", { kind: "wildcard", subject: "a.*" }, 0, unstored, "amqp:not-implemented"],
    ["wildcard, unsettled, mixed", { kind: "wildcard", subject: "a.*" }, 0, mixed, "amqp:not-implemented"],
    [
      "queue on an unstored address",
      { kind: "queue", subject: "x", queue: "q", wildcard: false },
      2,
      unstored,
      "amqp:not-found",
    ],
    [
      "queue across streams",
      { kind: "queue", subject: "x.*", queue: "q", wildcard: true },
      2,
      mixed,
      "amqp:precondition-failed",
    ],
  ] as const)("%s", (_what, address, mode, coverage, expected) => {
    const plan = planSource(address as never, mode, () => coverage);
    if (typeof expected === "string") expect(plan).toMatchObject({ ok: false, error: { condition: expected } });
    else expect(plan).toMatchObject({ ok: true, value: expected });
  });

  it("a durable source: its named consumer on the stream that stores it, in every settle mode; refused elsewhere", () => {
    for (const mode of [0, 1, 2] as const) {
      expect(planSource({ kind: "wildcard", subject: "a.*" }, mode, () => stored, "d1")).toMatchObject({
        ok: true,
        value: { kind: "durable", stream: "S", consumer: "d1", settled: mode === 1 },
      });
      for (const elsewhere of [unstored, mixed])
        expect(planSource({ kind: "subject", subject: "a.b" }, mode, () => elsewhere, "d1")).toMatchObject({
          ok: false,
          error: { condition: "amqp:not-implemented" },
        });
    }
    // An operator queue is durable already.
    const queue = { kind: "queue", subject: "a.b", queue: "q", wildcard: false } as const;
    expect(planSource(queue, 2, () => stored, "d1")).toMatchObject({ ok: true, value: { kind: "queue" } });
  });

  it("durability: only a durable terminus that never expires is kept; its consumer name is per container and link name", () => {
    expect(durableSource({ durable: 2, expiry_policy: "never" })).toBe(true);
    expect(durableSource({ durable: 1, expiry_policy: "never" })).toBe(true);
    expect(durableSource({ durable: 2 })).toBe(false);
    expect(durableSource({ durable: 2, expiry_policy: "session-end" })).toBe(false);
    expect(durableSource({ durable: 0, expiry_policy: "never" })).toBe(false);
    expect(durableSource(null)).toBe(false);
    const name = durableConsumerName("client", "sub");
    expect(name).toMatch(/^mqgw-amqp-[0-9a-f]{24}$/);
    expect(durableConsumerName("client", "sub")).toBe(name);
    expect(durableConsumerName("client2", "sub")).not.toBe(name);
    // The separator keeps ("ab", "c") and ("a", "bc") apart.
    expect(durableConsumerName("ab", "c")).not.toBe(durableConsumerName("a", "bc"));
  });

  const info = (config: Record<string, unknown>) =>
    ({ name: "q", config: { ack_policy: "explicit", ...config } }) as unknown as ConsumerInfo;
  it.each([
    ["fits", {}, "a.b", undefined],
    ["push", { deliver_subject: "d" }, "a.b", "amqp:not-implemented"],
    ["ack none", { ack_policy: "none" }, "a.b", "amqp:not-implemented"],
    ["max_bytes", { max_bytes: 10 }, "a.b", "amqp:precondition-failed"],
    ["filter outside", { filter_subject: "a.c" }, "a.b", "amqp:precondition-failed"],
    ["filters inside a wildcard address", { filter_subjects: ["a.b", "a.c"] }, "a.*", undefined],
  ] as const)("queue that %s", (_what, config, address, condition) => {
    const problem = queueProblem(info({ filter_subject: "a.b", ...config }), address, ["a.>"]);
    expect(problem?.condition).toBe(condition);
  });
});

describe("SASL PLAIN", () => {
  const resp = (...parts: string[]) => Buffer.from(parts.join("\u0000"));
  it("user and password; a password alone is a token; nothing is anonymous", () => {
    expect(plainLogin(resp("", "alice", "pw"))).toEqual({
      credentials: { user: "alice", pass: "pw" },
      username: "alice",
      mechanism: "PLAIN",
    });
    expect(plainLogin(resp("", "", "t0ken"))).toEqual({ credentials: { token: "t0ken" }, mechanism: "PLAIN" });
    expect(plainLogin(resp("", "", ""))).toEqual({ credentials: {}, mechanism: "PLAIN" });
    expect(plainLogin(Buffer.from("no separators"))).toBeUndefined();
  });
});
