// Issue 8, item 3, AMQP side (test/amqp/hostile.test.ts has the fixed cases: bad
// headers, one oversize frame, bad channel, credit violations, attach storms). Here:
// fast-check random and mutated byte streams built from what a real client sends,
// half-open connections, oversize length prefixes in every phase, deeply nested values.
// The gateway answers or closes, stays up, and another client's traffic keeps flowing.
import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient, bodyText, collect, rhea, send } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";

const MAX_FRAME = 65_536;
const AMQP_HEADER = Buffer.from([0x41, 0x4d, 0x51, 0x50, 0, 1, 0, 0]);
const SASL_HEADER = Buffer.from([0x41, 0x4d, 0x51, 0x50, 3, 1, 0, 0]);

/** Sends bytes on a fresh connection; resolves when the gateway closes it, or stops waiting after `boundMs`. */
function poke(port: number, bytes: Uint8Array, boundMs = 200): Promise<"closed" | "answered" | "silent"> {
  return new Promise((resolve) => {
    const s = tcpConnect(port, "127.0.0.1", () => s.write(bytes));
    let answered = false;
    s.on("data", () => {
      answered = true;
    });
    s.on("error", () => {});
    s.on("close", () => resolve(answered ? "answered" : "closed"));
    // A partial frame is legitimately left waiting for more bytes.
    setTimeout(() => {
      s.destroy();
      resolve(answered ? "answered" : "silent");
    }, boundMs).unref();
  });
}

/** Splits a client's byte stream into protocol headers and frames. */
function splitStream(b: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < b.length; ) {
    const len = b.toString("latin1", at, at + 4) === "AMQP" ? 8 : b.readUInt32BE(at);
    out.push(b.subarray(at, at + len));
    at += len;
  }
  return out;
}

/** `depth` described types, each the descriptor of the next: one byte per level. */
const nestedDescribed = (depth: number) => Buffer.concat([Buffer.alloc(depth, 0x00), Buffer.from([0x53, 0x10, 0x45])]);

/** `depth` list32s, each holding the next. */
function nestedLists(depth: number): Buffer {
  let inner = Buffer.from([0x45]);
  for (let i = 0; i < depth; i++) {
    const head = Buffer.alloc(9);
    head[0] = 0xd0;
    head.writeUInt32BE(inner.length + 4, 1);
    head.writeUInt32BE(1, 5);
    inner = Buffer.concat([head, inner]);
  }
  return inner;
}

/** An AMQP frame (type 0) or SASL frame (type 1) around a body. */
function frame(type: 0 | 1, body: Buffer, channel = 0): Buffer {
  const h = Buffer.alloc(8);
  h.writeUInt32BE(8 + body.length, 0);
  h[4] = 2;
  h[5] = type;
  h.writeUInt16BE(channel, 6);
  return Buffer.concat([h, body]);
}

describe("hostile AMQP input", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let port: number;
  /** What rhea sends for a whole session: SASL ANONYMOUS, open, begin, attach both ways, flow, transfers, detach, close. */
  let recorded: Buffer[] = [];

  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false });
    gw = await startGateway({
      nats: nats.url,
      config: {
        amqp: { listen: "127.0.0.1:0", max_frame_size: "64KiB" },
        limits: { connect_timeout: "1s" },
        log: { level: "info", format: "json" },
      },
    });
    port = gw.port("amqp");
    nc = await connect({ servers: nats.url });
    recorded = await record();
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  /** Runs a real rhea session through a recording proxy. */
  async function record(): Promise<Buffer[]> {
    const chunks: Buffer[] = [];
    const proxy: Server = createServer((client) => {
      const upstream = tcpConnect(port, "127.0.0.1");
      client.on("data", (d) => {
        chunks.push(d);
        upstream.write(d);
      });
      upstream.on("data", (d) => client.write(d));
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
      client.on("error", () => {});
      upstream.on("error", () => {});
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", () => r()));
    const proxyPort = (proxy.address() as { port: number }).port;
    const c = await AmqpClient.open(proxyPort, { username: "anonymous-trace", container_id: "recorded" });
    const r = collect(await c.receiver("fuzz.rec"));
    const s = await c.sender("fuzz.rec");
    expect(await send(s, { body: "one", application_properties: { k: "v", n: 1 }, message_id: "m1" })).toEqual({
      state: "accepted",
    });
    await r.next();
    const relay = await c.sender({ target: {} });
    expect(await send(relay, { to: "fuzz.rec", body: rhea.message.data_section(Buffer.from("two")) })).toEqual({
      state: "accepted",
    });
    await c.close();
    proxy.close();
    return splitStream(Buffer.concat(chunks));
  }

  /** Another client's round trip through the gateway. */
  async function stillServing(canary?: AmqpClient): Promise<void> {
    const c = canary ?? (await AmqpClient.open(port));
    const subject = `alive.${Math.random().toString(16).slice(2)}`;
    const r = collect(await c.receiver(subject));
    expect(await send(await c.sender(subject), { body: "alive" })).toEqual({ state: "accepted" });
    expect(bodyText((await r.next()).message)).toBe("alive");
    if (!canary) await c.close();
  }

  it("the recorded session is what a real client sends: SASL header, frames, AMQP header, frames", () => {
    expect(recorded[0]).toEqual(SASL_HEADER);
    expect(recorded.some((f) => f.equals(AMQP_HEADER))).toBe(true);
    expect(recorded.length).toBeGreaterThan(8);
  });

  it("random and mutated byte streams: each is answered or closed, the gateway stays up, a connected client keeps working", async () => {
    const canary = await AmqpClient.open(port, { container_id: "canary" });
    const valid = () => fc.constant(Buffer.concat(recorded));
    const mutated = fc.oneof(
      // Random bytes, alone or after a good header.
      fc.uint8Array({ minLength: 1, maxLength: 300 }),
      fc
        .tuple(fc.constantFrom(AMQP_HEADER, SASL_HEADER), fc.uint8Array({ minLength: 1, maxLength: 300 }))
        .map(([h, r]) => Buffer.concat([h, r])),
      // The real session with bytes overwritten.
      fc
        .tuple(valid(), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 8 }))
        .map(([b, flips]) => {
          const m = Buffer.from(b);
          for (const [i, v] of flips) m[i % m.length] = v;
          return m;
        }),
      // The real session cut short, with garbage after the cut.
      fc
        .tuple(valid(), fc.nat(), fc.uint8Array({ maxLength: 64 }))
        .map(([b, cut, tail]) => Buffer.concat([b.subarray(0, cut % b.length), tail])),
      // Frames dropped, repeated and reordered.
      fc
        .shuffledSubarray(
          recorded.map((_, i) => i),
          { minLength: 1 },
        )
        .chain((idx) =>
          fc
            .array(fc.constantFrom(...idx), { minLength: 1, maxLength: 20 })
            .map((order) => Buffer.concat(order.map((i) => recorded[i]!))),
        ),
      // One frame's length prefix replaced: huge, tiny or just wrong.
      fc
        .tuple(
          fc.integer({ min: 1, max: 100 }),
          fc.oneof(fc.constantFrom(0, 1, 7, 8, 0xffffffff, MAX_FRAME + 1, 0x40000000), fc.nat()),
        )
        .map(([which, size]) => {
          const frames = recorded.map((f) => Buffer.from(f));
          const candidates = frames
            .map((f, i) => (f.toString("latin1", 0, 4) === "AMQP" ? -1 : i))
            .filter((i) => i >= 0);
          const target = frames[candidates[which % candidates.length]!]!;
          target.writeUInt32BE(size >>> 0, 0);
          return Buffer.concat(frames);
        }),
    );
    await fc.assert(
      fc.asyncProperty(mutated, async (bytes) => {
        await poke(port, bytes);
        expect(gw.process.exitCode).toBeNull();
      }),
      { numRuns: 80 },
    );
    expect(canary.conn.is_open()).toBe(true);
    await stillServing(canary);
    await canary.close();
    await stillServing();
  });

  it("oversize length prefixes in every phase are refused from the first 8 bytes, without waiting for the body", async () => {
    const huge = (type: 0 | 1) => {
      const h = Buffer.alloc(8);
      h.writeUInt32BE(0xfffffff0, 0);
      h[4] = 2;
      h[5] = type;
      return h;
    };
    const saslInit = recorded[1]!;
    const open = recorded[recorded.findIndex((f) => f.equals(AMQP_HEADER)) + 1]!;
    for (const bytes of [
      Buffer.concat([SASL_HEADER, huge(1)]), // as the first SASL frame
      Buffer.concat([AMQP_HEADER, huge(0)]), // as the open, without SASL
      Buffer.concat([SASL_HEADER, saslInit, AMQP_HEADER, open, huge(0)]), // after the open
    ]) {
      const started = Date.now();
      expect(await poke(port, bytes, 5_000)).not.toBe("silent");
      expect(Date.now() - started).toBeLessThan(3_000);
    }
    await stillServing();
  });

  it("half-open connections: a header and half a frame, or a FIN after the header, are closed within connect_timeout", async () => {
    const open = recorded[recorded.findIndex((f) => f.equals(AMQP_HEADER)) + 1]!;
    const started = Date.now();
    // 1 s connect_timeout: a client that stops mid-frame is closed; this bound is well past it.
    expect(await poke(port, Buffer.concat([AMQP_HEADER, open.subarray(0, open.length - 3)]), 5_000)).not.toBe("silent");
    expect(Date.now() - started).toBeLessThan(4_000);
    // A client that half-closes its side after the header is answered and closed too.
    const result = await new Promise<string>((resolve) => {
      const s: Socket = tcpConnect(port, "127.0.0.1", () => s.end(SASL_HEADER));
      s.on("data", () => {});
      s.on("error", () => {});
      s.on("close", () => resolve("closed"));
      setTimeout(() => {
        s.destroy();
        resolve("silent");
      }, 5_000).unref();
    });
    expect(result).toBe("closed");
    // Many at once, each sending a header and nothing else: all closed, the gateway serves on.
    const many = await Promise.all(Array.from({ length: 100 }, () => poke(port, SASL_HEADER, 5_000)));
    expect(many.filter((r) => r === "silent")).toEqual([]);
    await stillServing();
  });

  describe("deeply nested AMQP values", () => {
    it.each([
      ["described types in the open performative", () => frame(0, nestedDescribed(60_000))],
      [
        "list32s in the open performative",
        () => frame(0, Buffer.concat([Buffer.from([0x00, 0x53, 0x10]), nestedLists(7_000)])),
      ],
    ])("%s: the connection is closed, the gateway stays up", async (_what, build) => {
      expect(await poke(port, Buffer.concat([AMQP_HEADER, build()]), 5_000)).not.toBe("silent");
      expect(gw.process.exitCode).toBeNull();
      await stillServing();
    });

    it("described types in a SASL init: closed, the gateway stays up", async () => {
      expect(await poke(port, Buffer.concat([SASL_HEADER, frame(1, nestedDescribed(60_000))]), 5_000)).not.toBe(
        "silent",
      );
      await stillServing();
    });

    it.each([
      ["application-properties", () => Buffer.concat([Buffer.from([0x00, 0x53, 0x74]), nestedLists(6_000)])],
      ["an amqp-value body", () => Buffer.concat([Buffer.from([0x00, 0x53, 0x77]), nestedLists(6_000)])],
      [
        "an amqp-value body of described types",
        () => Buffer.concat([Buffer.from([0x00, 0x53, 0x77]), nestedDescribed(60_000)]),
      ],
    ])(
      "a message whose %s nest thousands deep: answered (disposition or detach) or closed; the gateway stays up",
      async (_what, build) => {
        const c = await AmqpClient.open(port);
        const sender = await c.sender("fuzz.nested");
        const outcome = await new Promise<string>((resolve) => {
          sender.once("accepted", () => resolve("accepted"));
          sender.once("rejected", () => resolve("rejected"));
          sender.once("sender_close", () => resolve("detached"));
          sender.once("sender_error", () => resolve("detached"));
          c.conn.once("disconnected", () => resolve("closed"));
          c.conn.once("connection_close", () => resolve("closed"));
          sender.send(build(), undefined, 0);
        });
        expect(["accepted", "rejected", "detached", "closed"]).toContain(outcome);
        await c.close();
        expect(gw.process.exitCode).toBeNull();
        await stillServing();
      },
    );
  });

  it("after all of it, a NATS message still reaches a new AMQP receiver", async () => {
    const c = await AmqpClient.open(port);
    const r = collect(await c.receiver("fuzz.after"));
    await eventually(
      async () => {
        nc.publish("fuzz.after", "still");
        await nc.flush();
        return r.seen.length > 0 ? true : undefined;
      },
      5_000,
      "delivery",
    );
    await c.close();
  });
});
