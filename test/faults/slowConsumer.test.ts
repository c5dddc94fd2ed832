// Issue 22, item 8: what the gateway holds for one client is bounded by
// limits.max_client_buffer, whatever that client reads, and goes when the client does.
// Policy: docs/decisions/backpressure.md ("One client's bytes").

import { type Socket, connect as tcpConnect } from "node:net";
import { type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import type mqttPacket from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";
import { metric, pace, rssOf } from "./util.js";

const MiB = 1024 * 1024;
const BOUND = 4 * MiB; // limits.max_client_buffer's default
const BIG = 400 * 1024;

/** The client's held_bytes in /clients (undefined once it is gone). */
async function heldBytes(gw: GatewayHandle, clientId: string): Promise<number | undefined> {
  const page = (await (
    await fetch(`http://127.0.0.1:${gw.port("http")}/clients?client_id=${encodeURIComponent(clientId)}`)
  ).json()) as { clients: Array<{ held_bytes: number }> };
  return page.clients[0]?.held_bytes;
}

/** What the gateway's V8 holds outside its heap (Buffers' bytes), from its /metrics. */
const external = (gw: GatewayHandle) => metric(gw, "nodejs_external_memory_bytes");

/** Samples `sample` every 20 ms while `work` runs; resolves with the highest value seen. */
async function peakOf(sample: () => Promise<number>, work: () => Promise<void>): Promise<number> {
  let peak = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      peak = Math.max(peak, await sample());
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  try {
    await work();
  } finally {
    running = false;
    await loop;
  }
  return Math.max(peak, await sample());
}

/** A subscriber that reads and acknowledges everything; counts what it got, in order. */
function reader(c: RawMqtt): { got: string[] } {
  const got: string[] = [];
  const take = () => {
    for (const p of c.packets.splice(0)) {
      if (p.cmd !== "publish") continue;
      got.push((p as mqttPacket.IPublishPacket).payload.subarray(0, 8).toString().trim());
      if (p.qos) c.send({ cmd: "puback", messageId: p.messageId } as mqttPacket.Packet);
    }
  };
  c.socket.on("data", take);
  take();
  return { got };
}

/**
 * `n` messages of `size` bytes, each starting with its number, on core NATS, as fast as the
 * reading subscriber takes them (`got`, at most 8 ahead): its pace, not the slow one's.
 */
async function flood(
  nc: NatsConnection,
  subject: string,
  n: number,
  size: number,
  qos: 0 | 1,
  got: { length: number },
): Promise<void> {
  const h = headers();
  h.set("Mqgw-QoS", String(qos));
  for (let i = 1; i <= n; i++) {
    const payload = Buffer.alloc(size, 0x61);
    payload.write(String(i).padEnd(8));
    nc.publish(subject, payload, { headers: h });
    if (i % 8 === 0) {
      await nc.flush();
      await eventually(() => (got.length >= i - 8 ? true : undefined), 20_000, `message ${i - 8} read`);
    }
  }
  await nc.flush();
}

describe("one client's bytes are bounded (limits.max_client_buffer)", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "SLOWBIG", subjects: ["kept.>"] });
    gw = await startGateway({
      nats: nats.url,
      // A deadline longer than the floods: here the client is held at its bound, not ended.
      config: {
        bindings: [{ stream: "SLOWBIG" }],
        limits: { write_deadline: "120s" },
        log: { level: "info", format: "json" },
      },
    });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("a clean-start QoS 1 subscriber that stops reading while 700 messages of 400 KB (280 MB) pass: the gateway holds at most the bound for it, another subscriber gets every one, and the memory goes when it leaves", async () => {
    const slow = await RawMqtt.connected(gw.port("mqtt"), 5, { clientId: "stops-reading" });
    const healthy = await RawMqtt.connected(gw.port("mqtt"), 5, { clientId: "keeps-reading" });
    for (const c of [slow, healthy]) {
      c.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "big/q1", qos: 1 }] } as mqttPacket.Packet);
      await c.next("suback");
    }
    const { got } = reader(healthy);
    slow.socket.pause();
    const dropsBefore = await metric(gw, "mqgw_dropped_total", { protocol: "mqtt", reason: "slow_consumer" });
    const baseRss = rssOf(gw.process.pid!);
    const baseExternal = await external(gw);
    let rssPeak = baseRss;
    const N = 700;
    const heldPeak = await peakOf(
      async () => {
        rssPeak = Math.max(rssPeak, rssOf(gw.process.pid!));
        return (await heldBytes(gw, "stops-reading")) ?? 0;
      },
      async () => {
        await flood(nc, "big.q1", N, BIG, 1, got);
        await eventually(() => (got.length === N ? true : undefined), 120_000, `all ${N} to the reading subscriber`);
      },
    );
    // The bound, and one message past it (the one that reached it).
    expect(heldPeak).toBeGreaterThan(BOUND / 2);
    expect(heldPeak).toBeLessThanOrEqual(BOUND + BIG + 1024);
    // Before: 790 MiB more for this one client. What is left is the reading client's traffic
    // that V8 has not collected yet.
    expect(rssPeak - baseRss).toBeLessThan(160 * MiB);
    expect(got).toEqual(Array.from({ length: N }, (_, i) => String(i + 1)));
    expect(
      (await metric(gw, "mqgw_dropped_total", { protocol: "mqtt", reason: "slow_consumer" })) - dropsBefore,
    ).toBeGreaterThan(N / 2);
    slow.end();
    await eventually(async () => ((await heldBytes(gw, "stops-reading")) === undefined ? true : undefined));
    // Nothing of the client stays: V8's external bytes (Buffers) come back near where they
    // were (4 MiB before; 905 MiB were held at the end of the flood before issue 22). V8 frees
    // them when it collects, which an idle process puts off: a trickle of traffic to the
    // reading client makes it collect, and the lowest value seen is what is kept.
    let lowest = Number.POSITIVE_INFINITY;
    await eventually(
      async () => {
        lowest = Math.min(lowest, await external(gw));
        if (lowest < baseExternal + 4 * BOUND) return true;
        nc.publish("big.q1", Buffer.alloc(BIG, 0x63));
        return undefined;
      },
      30_000,
      "external memory back",
    ).catch((e) => {
      throw new Error(
        `${(e as Error).message}: lowest ${(lowest / MiB).toFixed(1)} MiB, base ${(baseExternal / MiB).toFixed(1)}`,
      );
    });
    healthy.end();
  }, 180_000);

  it("a persistent QoS 1 subscriber on a stored subject that stops reading: its pull pauses at the bound, the rest stays in the stream, none is dropped, and all arrive in order once it reads", async () => {
    const js = jetstream(nc);
    const slow = await RawMqtt.connected(gw.port("mqtt"), 5, {
      clientId: "stored-stops",
      clean: false,
      properties: { sessionExpiryInterval: 300 },
    });
    slow.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "kept/big", qos: 1 }] } as mqttPacket.Packet);
    await slow.next("suback");
    slow.socket.pause();
    const dropsBefore = await metric(gw, "mqgw_dropped_total", { protocol: "mqtt" });
    const N = 120; // 48 MiB
    const h = headers();
    h.set("Mqgw-QoS", "1");
    const heldPeak = await peakOf(
      async () => (await heldBytes(gw, "stored-stops")) ?? 0,
      async () => {
        for (let i = 1; i <= N; i++) {
          const payload = Buffer.alloc(BIG, 0x61);
          payload.write(String(i).padEnd(8));
          await js.publish("kept.big", payload, { headers: h });
        }
        // Settled: the gateway asks for nothing more while the client's bytes are at the bound.
        await eventually(async () => (((await heldBytes(gw, "stored-stops")) ?? 0) >= BOUND ? true : undefined));
      },
    );
    expect(heldPeak).toBeLessThanOrEqual(BOUND + 2 * BIG);
    const consumer = await eventually(async () => {
      for await (const c of jsm.consumers.list("SLOWBIG")) if (c.num_ack_pending > 0) return c;
      return undefined;
    });
    // What the client's bytes (and the kernel's socket buffers) took; the rest waits in the stream.
    expect(consumer.num_ack_pending).toBeLessThan(40);
    expect(consumer.num_pending).toBeGreaterThan(N - 40);
    expect((await metric(gw, "mqgw_dropped_total", { protocol: "mqtt" })) - dropsBefore).toBe(0);
    const { got } = reader(slow);
    slow.socket.resume();
    await eventually(() => (got.length >= N ? true : undefined), 60_000, `all ${N} stored messages`);
    expect(got).toEqual(Array.from({ length: N }, (_, i) => String(i + 1)));
    slow.send({ cmd: "disconnect", reasonCode: 0, properties: { sessionExpiryInterval: 0 } } as mqttPacket.Packet);
  }, 120_000);
});

describe("a client stuck at its bound is disconnected after limits.write_deadline", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  const DEADLINE_MS = 3_000;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "STUCK", subjects: ["stuck.kept.>"] });
    gw = await startGateway({
      nats: nats.url,
      config: {
        bindings: [{ stream: "STUCK" }],
        limits: { write_deadline: `${DEADLINE_MS}ms` },
        log: { level: "info", format: "json" },
      },
    });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  // Each way a client's bytes reach the bound: live QoS 0, live QoS 1, stored QoS 1.
  const cases = [
    { kind: "QoS 0, core", topic: "stuck/q0", qos: 0, persistent: false },
    { kind: "QoS 1, core", topic: "stuck/q1", qos: 1, persistent: false },
    { kind: "QoS 1, stored", topic: "stuck/kept/q1", qos: 1, persistent: true },
  ] as const;

  for (const c of cases) {
    it(`${c.kind}: a client that stops reading is disconnected once its socket takes nothing for the deadline, and what it held goes`, async () => {
      const clientId = `stuck-${c.topic.replaceAll("/", "-")}`;
      const slow = await RawMqtt.connected(gw.port("mqtt"), 5, {
        clientId,
        ...(c.persistent ? { clean: false, properties: { sessionExpiryInterval: 60 } } : {}),
      });
      slow.send({
        cmd: "subscribe",
        messageId: 1,
        subscriptions: [{ topic: c.topic, qos: c.qos }],
      } as mqttPacket.Packet);
      await slow.next("suback");
      slow.socket.pause();
      const h = headers();
      h.set("Mqgw-QoS", String(c.qos));
      const js = jetstream(nc);
      const subject = c.topic.replaceAll("/", ".");
      const stuckLines = () =>
        gw.logs.filter(
          (l) =>
            l.msg === "closing MQTT client: protocol error" &&
            l.reason === "slow consumer: nothing read for limits.write_deadline",
        ).length;
      const linesBefore = stuckLines();
      const started = Date.now();
      // 16 MiB: past the bound and what the kernel's socket buffers on both sides take.
      for (let i = 0; i < 40; i++) {
        const payload = Buffer.alloc(BIG, 0x61);
        if (c.persistent) await js.publish(subject, payload, { headers: h });
        else nc.publish(subject, payload, { headers: h });
      }
      await nc.flush();
      await eventually(async () => ((await heldBytes(gw, clientId)) === undefined ? true : undefined), 10_000, "gone");
      // Not before the deadline: the check starts once the bound is reached.
      expect(Date.now() - started).toBeGreaterThanOrEqual(DEADLINE_MS);
      // The log is written asynchronously: it may come a moment after the close.
      await eventually(() => (stuckLines() === linesBefore + 1 ? true : undefined), 5_000, "the slow consumer logged");
      slow.end();
    }, 60_000);
  }

  it("a client that reads in bursts, at the bound while it pauses, is not stuck: it stays and keeps receiving", async () => {
    const slow = await RawMqtt.connected(gw.port("mqtt"), 5, { clientId: "reads-slowly" });
    slow.send({
      cmd: "subscribe",
      messageId: 1,
      subscriptions: [{ topic: "stuck/slowly", qos: 0 }],
    } as mqttPacket.Packet);
    await slow.next("suback");
    slow.socket.pause();
    let received = 0;
    // Each burst reads 1 MiB (a quarter of the bound), then the reader pauses again.
    const BURST = MiB;
    let burst = 0;
    slow.socket.on("data", (chunk: Buffer) => {
      received += slow.packets.splice(0).filter((p) => p.cmd === "publish").length;
      burst += chunk.length;
      if (burst >= BURST) slow.socket.pause();
    });
    // Three deadlines of a publisher far faster than the reader, who reads a burst three times
    // a deadline: the socket takes bytes within every deadline, though not all the time.
    const until = Date.now() + 3 * DEADLINE_MS;
    let atBound = 0;
    const bursts = setInterval(() => {
      burst = 0;
      slow.socket.resume();
    }, DEADLINE_MS / 3);
    try {
      while (Date.now() < until) {
        for (let i = 0; i < 4; i++) nc.publish("stuck.slowly", Buffer.alloc(BIG, 0x62));
        await nc.flush();
        if (((await heldBytes(gw, "reads-slowly")) ?? 0) >= BOUND) atBound++;
        await pace(20);
      }
    } finally {
      clearInterval(bursts);
    }
    expect(atBound).toBeGreaterThan(5);
    expect(await heldBytes(gw, "reads-slowly")).toBeDefined();
    expect(received).toBeGreaterThan(0);
    slow.socket.resume();
    slow.end();
  }, 60_000);
});

describe("partial CONNECTs cost what they hold, and give it back", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  beforeAll(async () => {
    nats = await startNatsServer();
    // limits.max_connect_buffer at its default, 16 MiB.
    gw = await startGateway({ nats: nats.url, config: { log: { level: "info", format: "json" } } });
  });
  afterAll(async () => {
    await gw?.stop();
    await nats?.stop();
  });

  it("50 sockets sending 900 KB of a CONNECT in 16 KiB writes: the gateway grows by about the 16 MiB it may hold, not by a copy per read", async () => {
    const header = Buffer.from([0x10, 0x80, 0x90, 0x37]); // remaining length 900,096
    const body = Buffer.alloc(900_000, 0x41);
    const baseRss = rssOf(gw.process.pid!);
    const baseExternal = await external(gw);
    const sockets: Socket[] = [];
    let closed = 0;
    const peakExternal = await peakOf(
      () => external(gw),
      async () => {
        for (let i = 0; i < 50; i++) {
          const s = await new Promise<Socket>((resolve) => {
            const sock = tcpConnect(gw.port("mqtt"), "127.0.0.1", () => resolve(sock));
          });
          s.on("error", () => {});
          s.on("close", () => closed++);
          s.write(header);
          for (let at = 0; at < body.length; at += 16 * 1024) {
            s.write(body.subarray(at, at + 16 * 1024));
            await new Promise<void>((r) => setImmediate(r));
          }
          sockets.push(s);
        }
        // What the limit does not take is closed.
        await eventually(
          async () =>
            (await metric(gw, "mqgw_refused_total", { reason: "connect_buffer_full" })) >= 30 ? true : undefined,
          20_000,
          "sockets past the limit refused",
        );
      },
    );
    const rssGrowth = rssOf(gw.process.pid!) - baseRss;
    expect(peakExternal - baseExternal).toBeLessThan(48 * MiB);
    expect(rssGrowth).toBeLessThan(96 * MiB);
    expect(closed).toBeGreaterThanOrEqual(30);
    for (const s of sockets) s.destroy();
    // A normal client still connects. (That closed sockets give their share of the limit back
    // is test/auth/limits.test.ts's; V8's external memory is too noisy here to show 16 MiB go.)
    const c = await RawMqtt.connected(gw.port("mqtt"), 5);
    c.end();
  }, 120_000);
});
