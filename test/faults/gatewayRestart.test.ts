// Issue 8, item 1: the gateway SIGKILLed and started again (a new process, a new id, as a
// supervisor would). MQTT sessions resume from the KV bucket; stored deliveries the
// client had not acknowledged come back at once (consumer reset, not ack_wait); what was
// published meanwhile is delivered.
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const persistent = (clientId: string, version: 4 | 5) =>
  version === 5 ? { clientId, clean: false, properties: { sessionExpiryInterval: 600 } } : { clientId, clean: false };

describe("the gateway killed (SIGKILL) and started again", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const config = { bindings: [{ stream: "ORDERS" }], log: { level: "info", format: "json" } };

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "ORDERS", subjects: ["orders.>"] });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  /** The durable consumer the gateway made for a session's filter (named by a hash; found by its filter). */
  async function consumerFor(subject: string) {
    for await (const c of jsm.consumers.list("ORDERS")) {
      const filters = c.config.filter_subjects ?? (c.config.filter_subject ? [c.config.filter_subject] : []);
      if (filters.includes(subject)) return c;
    }
    return undefined;
  }

  /** Receives QoS 1 PUBLISHes on a raw client, acknowledging only those `ack` says. */
  function inbox(c: RawMqtt, ack: (payload: string) => boolean) {
    const got: Array<{ payload: string; qos: number; topic: string }> = [];
    c.socket.on("data", () => {
      // Only PUBLISHes are taken: the test still waits for other packets with next().
      for (
        let i = c.packets.findIndex((p) => p.cmd === "publish");
        i >= 0;
        i = c.packets.findIndex((p) => p.cmd === "publish")
      ) {
        const pub = c.packets.splice(i, 1)[0] as mqtt.IPublishPacket;
        got.push({ payload: pub.payload.toString(), qos: pub.qos, topic: pub.topic });
        if (pub.qos === 1 && ack(pub.payload.toString()))
          c.send({ cmd: "puback", messageId: pub.messageId } as mqtt.Packet);
      }
    });
    return got;
  }

  it.each([5, 4] as const)(
    "MQTT %s: the session resumes with session present and its subscriptions; held messages come back, none acknowledged does",
    async (version) => {
      const tag = `gk${version}`;
      const gw1 = await startGateway({ nats: nats.url, config });
      let gw2: GatewayHandle | undefined;
      try {
        const sub = await RawMqtt.connected(gw1.port("mqtt"), version, persistent(`${tag}-sub`, version));
        sub.send({
          cmd: "subscribe",
          messageId: 1,
          subscriptions: [
            { topic: `orders/${tag}/+`, qos: 1 },
            { topic: `live/${tag}/#`, qos: 0 },
          ],
        } as mqtt.Packet);
        expect(((await sub.next("suback")) as mqtt.ISubackPacket).granted).toEqual([1, 0]);
        const first = inbox(sub, (payload) => payload === "m1" || payload === "m2");

        const pub = await RawMqtt.connected(gw1.port("mqtt"), 5, { clientId: `${tag}-pub` });
        for (let i = 1; i <= 4; i++) {
          pub.send({
            cmd: "publish",
            topic: `orders/${tag}/${i}`,
            payload: Buffer.from(`m${i}`),
            qos: 1,
            messageId: i,
            retain: false,
            dup: false,
          } as mqtt.Packet);
          await pub.next("puback");
        }
        await eventually(() => (first.length >= 4 ? true : undefined), 10_000, "four stored deliveries");
        // m1 and m2 acknowledged by the client and, through the gateway, in the stream; m3, m4 held.
        const consumer = await eventually(
          async () => {
            const c = await consumerFor(`orders.${tag}.*`);
            return c && c.num_ack_pending === 2 ? c : undefined;
          },
          10_000,
          "two acks reach the stream",
        );

        gw1.process.kill("SIGKILL");
        await gw1.stop();
        // Published while no gateway runs: only the stream has it.
        const h = headers();
        h.set("Mqgw-QoS", "1");
        await (await import("@nats-io/jetstream")).jetstream(nc).publish(`orders.${tag}.5`, "m5", { headers: h });
        // A killed gateway cannot hand back what its client held; left to the stream, it
        // would come back after ack_wait (30 s). The new gateway, finding the owner dead,
        // resets the consumer so it comes back at once.
        const ackWaitMs = consumer.config.ack_wait / 1_000_000;
        expect(ackWaitMs).toBe(30_000);

        gw2 = await startGateway({ nats: nats.url, config });
        expect(gw2.id).not.toBe(gw1.id);
        const back = await RawMqtt.open(gw2.port("mqtt"), version);
        const again = inbox(back, () => true);
        back.send({
          cmd: "connect",
          protocolId: "MQTT",
          protocolVersion: version,
          keepalive: 60,
          ...persistent(`${tag}-sub`, version),
        } as mqtt.Packet);
        const connack = (await back.next("connack", 10_000)) as mqtt.IConnackPacket;
        const resumedAt = performance.now();
        expect(connack.sessionPresent).toBe(true);
        // No SUBSCRIBE sent: the subscriptions came from the KV bucket.
        await eventually(
          () => (new Set(again.map((g) => g.payload)).size >= 3 ? true : undefined),
          ackWaitMs,
          "m3, m4 and m5 delivered after the restart",
        );
        // Held ones too, long before ack_wait could have brought them back.
        expect(performance.now() - resumedAt).toBeLessThan(ackWaitMs / 5);
        expect([...new Set(again.map((g) => g.payload))].sort()).toEqual(["m3", "m4", "m5"]);
        expect(again.every((g) => g.qos === 1)).toBe(true);
        // The core subscription is back too.
        nc.publish(`live.${tag}.x`, "live");
        await eventually(
          () => (again.some((g) => g.topic === `live/${tag}/x`) ? true : undefined),
          5_000,
          "live delivery",
        );
        // The KV entry now names the new gateway as the owner.
        const kv = await new Kvm(nc).open("MQGW_SESSIONS");
        const entry = await kv.get(Buffer.from(`${tag}-sub`).toString("base64url"));
        expect(entry?.json<{ owner: string; connected: boolean }>()).toMatchObject({ owner: gw2.id, connected: true });
        back.end();
        pub.end();
      } finally {
        await gw1.stop();
        await gw2?.stop();
      }
    },
  );
  it("restarted with the same configured id: the session it held before the kill is resumed and its held deliveries come back at once", async () => {
    const fixed = { ...config, id: "gk-fixed" };
    const gw1 = await startGateway({ nats: nats.url, config: fixed });
    let gw2: GatewayHandle | undefined;
    try {
      const sub = await RawMqtt.connected(gw1.port("mqtt"), 5, persistent("gkf-sub", 5));
      sub.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "orders/gkf/+", qos: 1 }] } as mqtt.Packet);
      await sub.next("suback");
      const first = inbox(sub, () => false);
      const pub = await RawMqtt.connected(gw1.port("mqtt"), 5, { clientId: "gkf-pub" });
      for (let i = 1; i <= 2; i++) {
        pub.send({
          cmd: "publish",
          topic: `orders/gkf/${i}`,
          payload: Buffer.from(`f${i}`),
          qos: 1,
          messageId: i,
          retain: false,
          dup: false,
        } as mqtt.Packet);
        await pub.next("puback");
      }
      await eventually(() => (first.length >= 2 ? true : undefined), 10_000, "two stored deliveries");
      const consumer = await eventually(
        async () => {
          const c = await consumerFor("orders.gkf.*");
          return c && c.num_ack_pending === 2 ? c : undefined;
        },
        10_000,
        "both held",
      );
      const ackWaitMs = consumer.config.ack_wait / 1_000_000;
      gw1.process.kill("SIGKILL");
      await gw1.stop();

      gw2 = await startGateway({ nats: nats.url, config: fixed });
      expect(gw2.id).toBe(gw1.id);
      const back = await RawMqtt.open(gw2.port("mqtt"), 5);
      const again = inbox(back, () => true);
      back.send({
        cmd: "connect",
        protocolId: "MQTT",
        protocolVersion: 5,
        keepalive: 60,
        ...persistent("gkf-sub", 5),
      } as mqtt.Packet);
      expect(((await back.next("connack", 10_000)) as mqtt.IConnackPacket).sessionPresent).toBe(true);
      const resumedAt = performance.now();
      await eventually(
        () => (new Set(again.map((g) => g.payload)).size >= 2 ? true : undefined),
        ackWaitMs,
        "f1 and f2 again",
      );
      expect(performance.now() - resumedAt).toBeLessThan(ackWaitMs / 5);
      expect([...new Set(again.map((g) => g.payload))].sort()).toEqual(["f1", "f2"]);
      back.end();
      pub.end();
    } finally {
      await gw1.stop();
      await gw2?.stop();
    }
  });
});
