// Issue 8, item 2: slow consumers cost bounded memory (overflow dropped and counted,
// stored messages left in the stream) and fast publishers are slowed by TCP backpressure.
// Policy: docs/decisions/backpressure.md.

import type { Socket } from "node:net";
import { type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import mqttPacket from "mqtt-packet";
import type { Receiver, Sender } from "rhea";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient, collect } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";
import { metric, rssOf, within } from "./util.js";

const MiB = 1024 * 1024;

/** Runs `work` while sampling the gateway's RSS; resolves with the highest growth over `base`. */
async function peakGrowth(pid: number, base: number, work: () => Promise<void>): Promise<number> {
  let peak = base;
  const timer = setInterval(() => {
    peak = Math.max(peak, rssOf(pid));
  }, 20);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  return Math.max(peak, rssOf(pid)) - base;
}

/** Publishes `total` bytes in messages of `size` on core NATS, flushing every few MiB so NATS does not cut the publisher off. */
async function flood(nc: NatsConnection, subject: string, total: number, size: number, qos?: 1): Promise<number> {
  const payload = Buffer.alloc(size, 0x61);
  const h = qos ? headers() : undefined;
  h?.set("Mqgw-QoS", "1");
  let n = 0;
  for (let sent = 0; sent < total; sent += size) {
    nc.publish(subject, payload, h ? { headers: h } : undefined);
    if (++n % Math.max(1, Math.floor((4 * MiB) / size)) === 0) await nc.flush();
  }
  await nc.flush();
  return n;
}

describe("backpressure and slow consumers", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "SLOW", subjects: ["stored.>"] });
    gw = await startGateway({
      nats: nats.url,
      // Clients here are held at their bound (limits.max_client_buffer), not ended as stuck.
      config: {
        bindings: [{ stream: "SLOW" }],
        limits: { write_deadline: "300s" },
        log: { level: "info", format: "json" },
      },
    });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  /** A healthy subscriber on another topic still gets a message through the same gateway. */
  async function othersFlow(): Promise<void> {
    const c = await RawMqtt.connected(gw.port("mqtt"), 5);
    c.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "healthy/t", qos: 0 }] } as mqttPacket.Packet);
    await c.next("suback");
    nc.publish("healthy.t", "ok");
    expect(((await c.next("publish")) as mqttPacket.IPublishPacket).payload.toString()).toBe("ok");
    c.end();
  }

  it("MQTT QoS 0 to a consumer that never reads: memory stays bounded, the overflow is dropped and counted (slow_consumer)", async () => {
    const slow = await RawMqtt.connected(gw.port("mqtt"), 5, { clientId: "never-reads" });
    slow.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "slow/q0", qos: 0 }] } as mqttPacket.Packet);
    await slow.next("suback");
    slow.socket.pause();
    const dropsNow = () => metric(gw, "mqgw_dropped_total", { protocol: "mqtt", reason: "slow_consumer" });
    const handled = async () =>
      (await metric(gw, "mqgw_messages_out_total", { protocol: "mqtt", outcome: "delivered" })) + (await dropsNow());
    const [before, handledBefore] = [await dropsNow(), await handled()];
    const base = rssOf(gw.process.pid!);
    const total = 256 * MiB;
    const growth = await peakGrowth(gw.process.pid!, base, async () => {
      const n = await flood(nc, "slow.q0", total, 32 * 1024);
      // Every message either written to the socket or dropped.
      await eventually(
        async () => ((await handled()) - handledBefore >= n ? true : undefined),
        20_000,
        "the flood handled",
      );
    });
    // Without the drop the gateway would hold most of the 256 MiB for this one socket.
    // Node 24 leaves more read buffers uncollected for a while than Node 20 (up to 130 MiB
    // seen here, against under 100), hence the room.
    expect(growth).toBeLessThan(160 * MiB);
    expect((await dropsNow()) - before).toBeGreaterThan((total / (32 * 1024)) * 0.5);
    await othersFlow();
    slow.end();
  });

  it("MQTT QoS 1 to a consumer that never acknowledges: 256 in flight, 1,000 waiting, older ones dropped and counted (backlog_full)", async () => {
    const slow = await RawMqtt.connected(gw.port("mqtt"), 5, { clientId: "never-acks" });
    slow.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "slow/q1", qos: 1 }] } as mqttPacket.Packet);
    await slow.next("suback");
    const before = await metric(gw, "mqgw_dropped_total", { protocol: "mqtt", reason: "backlog_full" });
    const h = headers();
    h.set("Mqgw-QoS", "1");
    const N = 3_000;
    for (let i = 1; i <= N; i++) nc.publish("slow.q1", String(i), { headers: h });
    await nc.flush();
    // In flight: the client's Receive Maximum capped by mqtt.receive_maximum (256); backlog: 1,000.
    await eventually(
      async () =>
        (await metric(gw, "mqgw_dropped_total", { protocol: "mqtt", reason: "backlog_full" })) - before ===
        N - 256 - 1_000
          ? true
          : undefined,
      10_000,
      `${N - 1_256} dropped`,
    );
    const inFlight = await eventually(
      () => {
        const got = slow.packets.filter((p) => p.cmd === "publish") as mqttPacket.IPublishPacket[];
        return got.length === 256 ? got : undefined;
      },
      10_000,
      "256 in flight",
    );
    expect(inFlight.map((p) => p.payload.toString())).toEqual(Array.from({ length: 256 }, (_, i) => String(i + 1)));
    // Acknowledging frees the slots: the backlog follows, oldest first, the oldest of it dropped.
    slow.packets.splice(0);
    for (const p of inFlight) slow.send({ cmd: "puback", messageId: p.messageId } as mqttPacket.Packet);
    const next = (await slow.next("publish")) as mqttPacket.IPublishPacket;
    expect(next.payload.toString()).toBe(String(N - 1_000 + 1));
    slow.end();
  });

  it("stored QoS 1 deliveries to a consumer that never acknowledges stay in the stream; none is dropped, all arrive once it reads", async () => {
    const js = jetstream(nc);
    const slow = await RawMqtt.connected(gw.port("mqtt"), 5, {
      clientId: "stored-slow",
      clean: false,
      properties: { sessionExpiryInterval: 300 },
    });
    slow.send({
      cmd: "subscribe",
      messageId: 1,
      subscriptions: [{ topic: "stored/slow/+", qos: 1 }],
    } as mqttPacket.Packet);
    await slow.next("suback");
    const before = await metric(gw, "mqgw_dropped_total", { protocol: "mqtt" });
    const h = headers();
    h.set("Mqgw-QoS", "1");
    const N = 1_500;
    await Promise.all(
      Array.from({ length: N }, (_, i) => js.publish(`stored.slow.${i % 10}`, String(i + 1), { headers: h })),
    );
    const consumer = await eventually(
      async () => {
        for await (const c of jsm.consumers.list("SLOW"))
          if (c.num_ack_pending > 0 && c.config.filter_subjects?.includes("stored.slow.*"))
            return c.num_ack_pending === 256 ? c : undefined;
        return undefined;
      },
      10_000,
      "the consumer at max_ack_pending",
    );
    // The rest waits in the stream, not in the gateway.
    expect(consumer.num_pending).toBe(N - 256);
    expect((await metric(gw, "mqgw_dropped_total", { protocol: "mqtt" })) - before).toBe(0);
    // Now the client reads and acknowledges: every message arrives.
    const seen = new Set<string>();
    const ackAll = () => {
      for (const p of slow.packets.splice(0)) {
        if (p.cmd !== "publish") continue;
        seen.add((p as mqttPacket.IPublishPacket).payload.toString());
        slow.send({ cmd: "puback", messageId: p.messageId } as mqttPacket.Packet);
      }
    };
    slow.socket.on("data", ackAll);
    ackAll();
    await eventually(() => (seen.size === N ? true : undefined), 30_000, `all ${N} stored messages`);
    slow.end();
  });

  it("a fast publisher is slowed, not buffered: while NATS is down the gateway stops reading, so the bytes wait in the client's socket", async () => {
    const pub = await RawMqtt.connected(gw.port("mqtt"), 4, { clientId: "fast-pub" });
    const sub = await RawMqtt.connected(gw.port("mqtt"), 4, { clientId: "fast-sub" });
    sub.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "fast/#", qos: 0 }] } as mqttPacket.Packet);
    await sub.next("suback");
    let received = 0;
    sub.socket.on("data", () => {
      for (const p of sub.packets.splice(0)) if (p.cmd === "publish") received++;
    });
    await nats.stop();
    await eventually(
      async () => ((await fetch(`http://127.0.0.1:${gw.port("http")}/healthz`)).status === 503 ? true : undefined),
      10_000,
      "NATS gone",
    );
    const base = rssOf(gw.process.pid!);
    const packet = mqttPacket.generate({
      cmd: "publish",
      topic: "fast/x",
      payload: Buffer.alloc(16 * 1024, 0x62),
      qos: 0,
      retain: false,
      dup: false,
    } as mqttPacket.Packet);
    const N = 2_048; // 32 MiB
    for (let i = 0; i < N; i++) pub.socket.write(packet);
    // The gateway does not take it: most of it is still queued in the publisher's own
    // socket (the kernel's buffers on both sides hold a few MiB).
    await eventually(
      () => ((pub.socket as Socket).writableLength > 16 * MiB ? true : undefined),
      5_000,
      "the publisher held back",
    );
    expect(rssOf(gw.process.pid!) - base).toBeLessThan(16 * MiB);
    nats = await startNatsServer({ port: nats.port, storeDir: nats.storeDir });
    // NATS is back: the gateway reads again and everything flows.
    await eventually(
      () => ((pub.socket as Socket).writableLength === 0 ? true : undefined),
      30_000,
      "the publisher drained",
    );
    await eventually(() => (received >= N * 0.9 ? true : undefined), 30_000, "delivered after NATS came back");
    expect(pub.closed).toBe(false);
    pub.end();
    sub.end();
  }, 60_000);

  describe("AMQP (credit)", () => {
    it("a sender is slowed by credit: the gateway never grants more than its window (64) beyond what it has settled", async () => {
      const a = await AmqpClient.open(gw.port("amqp"));
      const sender: Sender = await a.sender("amqp.fast");
      const credit = () => (sender as unknown as { credit: number }).credit;
      let peak = 0;
      let settled = 0;
      const N = 2_000;
      let sent = 0;
      await new Promise<void>((resolve) => {
        // Only what the credit allows: one transfer per unit, as a well-behaved client does.
        const pump = () => {
          peak = Math.max(peak, credit());
          for (let room = credit(); room > 0 && sent < N; room--) sender.send({ body: String(sent++) });
        };
        sender.on("sendable", pump);
        sender.on("accepted", () => {
          if (++settled === N) resolve();
        });
        pump();
      });
      expect(peak).toBeGreaterThan(0);
      expect(peak).toBeLessThanOrEqual(64);
      await a.close();
    });

    // receiverLink.ts pump() sends no further than the connection's outflow allows (4 MiB in
    // the socket's write queue and in rhea); a core subscription's overflow waits in a bounded
    // queue (1,000 messages, 8 MiB) and its oldest are dropped and counted. Before, 300 MiB
    // published to such a receiver grew the gateway by 460 MiB. The bound is the MQTT QoS 0
    // test's: passing 96 or 256 MiB through to a client that *does* read grows the gateway's
    // RSS by about 90 MiB too (garbage V8 has not collected yet; measured), so what is checked
    // is that the growth does not follow the flood.
    it("a receiver that grants much credit and then stops reading its socket: the gateway's memory stays bounded, the overflow is dropped and counted", async () => {
      const a = await AmqpClient.open(gw.port("amqp"));
      const r: Receiver = await a.receiver({ source: "amqp.slow", credit_window: 0 });
      r.add_credit(1_000_000);
      const got = collect(r);
      nc.publish("amqp.slow", "first");
      await got.next();
      const socket = (a.conn as unknown as { socket: Socket }).socket;
      socket.pause();
      const drops = () => metric(gw, "mqgw_dropped_total", { protocol: "amqp", reason: "slow_consumer" });
      const before = await drops();
      const base = rssOf(gw.process.pid!);
      const total = 256 * MiB;
      try {
        const growth = await peakGrowth(gw.process.pid!, base, async () => {
          const n = await flood(nc, "amqp.slow", total, 32 * 1024);
          // At most the outflow and the queue are held; everything else is dropped.
          await eventually(
            async () => ((await drops()) - before >= n - 1_000 - (16 * MiB) / (32 * 1024) ? true : undefined),
            20_000,
            "the overflow dropped",
          );
        });
        expect(growth).toBeLessThan(120 * MiB);
      } finally {
        socket.destroy();
      }
    });

    it("a stored source to a receiver that stops reading: nothing is dropped, the rest stays in the stream, all arrive once it reads", async () => {
      const a = await AmqpClient.open(gw.port("amqp"));
      const r: Receiver = await a.receiver({ source: "stored.amqpslow.x", credit_window: 0 });
      r.add_credit(1_000_000);
      const got = collect(r);
      const js = jetstream(nc);
      await js.publish("stored.amqpslow.x", "first");
      await got.next();
      const socket = (a.conn as unknown as { socket: Socket }).socket;
      socket.pause();
      const before = await metric(gw, "mqgw_dropped_total", { protocol: "amqp" });
      const N = 3_000;
      const payload = Buffer.alloc(16 * 1024, 0x63);
      for (let i = 0; i < N; i += 100)
        await Promise.all(Array.from({ length: 100 }, () => js.publish("stored.amqpslow.x", payload)));
      // The gateway pulled what fits its outflow and queue; the rest waits in the stream.
      const consumer = await eventually(
        async () => {
          for await (const c of jsm.consumers.list("SLOW"))
            if (c.config.filter_subject === "stored.amqpslow.x" && c.num_pending > 0) return c;
          return undefined;
        },
        10_000,
        "messages left in the stream",
      );
      expect(consumer.num_pending + consumer.num_ack_pending).toBeGreaterThan(1_000);
      socket.resume();
      await eventually(() => (got.seen.length >= N + 1 ? true : undefined), 30_000, `all ${N} stored messages`);
      expect((await metric(gw, "mqgw_dropped_total", { protocol: "amqp" })) - before).toBe(0);
      await a.close();
    });

    // The gateway held no backlog for the slow receiver, so there is none to write out first.
    it("after a slow AMQP receiver, others' traffic flows again at once", async () => {
      expect(
        await within(
          othersFlow().then(() => "flowed"),
          5_000,
          "hung",
        ),
      ).toBe("flowed");
    });
  });
});
