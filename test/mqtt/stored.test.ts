import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqttPacket from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectCollecting, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const session = (clientId: string) => ({
  protocolVersion: 5 as const,
  clientId,
  clean: false,
  properties: { sessionExpiryInterval: 600 },
});

describe("stored subjects (bindings) over MQTT", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const config = { bindings: [{ stream: "ORDERS" }] };

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "ORDERS", subjects: ["orders.>"] });
    gw = await startGateway({ nats: nats.url, config });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("a QoS 1 publish to a stored subject is in the stream when PUBACK comes, once even when resent", async () => {
    const c = await RawMqtt.connected(gw.port("mqtt"), 5, { clientId: "stored-pub" });
    const before = (await jsm.streams.info("ORDERS")).state.messages;
    const publish = (dup: boolean) =>
      c.send({
        cmd: "publish",
        topic: "orders/eu/1",
        payload: Buffer.from("o1"),
        qos: 1,
        messageId: 11,
        retain: false,
        dup,
      } as mqttPacket.Packet);
    publish(false);
    expect(((await c.next("puback")) as mqttPacket.IPubackPacket).reasonCode ?? 0).toBe(0);
    const stored = await jsm.streams.getMessage("ORDERS", { last_by_subj: "orders.eu.1" });
    expect(stored?.string()).toBe("o1");
    // The publish's own id, not one made from its content (docs/decisions/publish-identity.md).
    expect(stored?.header.get("Nats-Msg-Id")).toMatch(/^[A-Za-z0-9_-]{17,}$/);
    publish(true);
    await c.next("puback");
    expect((await jsm.streams.info("ORDERS")).state.messages).toBe(before + 1);
    c.end();
  });

  it("a QoS 1 subscriber gets, exactly once, what was published while it was away; plain NATS messages only live at QoS 0", async () => {
    const sub = await connectMqtt(gw.port("mqtt"), session("stored-sub"));
    await sub.subscribeAsync("orders/away/#", { qos: 1 });
    await sub.endAsync();

    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    for (let i = 0; i < 5; i++) await pub.publishAsync(`orders/away/${i}`, `m${i}`, { qos: 1 });
    nc.publish("orders.away.plain", "not for an absent client");
    await nc.flush();

    const { client: back, inbox } = await connectCollecting(gw.port("mqtt"), {
      ...session("stored-sub"),
      resubscribe: false,
    });
    expect(back.connack.sessionPresent).toBe(true);
    const seen = await inbox.count(5);
    // In the order they were stored: the consumer hands them out from its ack floor.
    expect(seen.map((s) => s.payload.toString())).toEqual(["m0", "m1", "m2", "m3", "m4"]);
    expect(seen.every((s) => s.packet.qos === 1)).toBe(true);
    nc.publish("orders.away.live", "live");
    const all = await inbox.count(6);
    expect([all[5]!.payload.toString(), all[5]!.packet.qos]).toEqual(["live", 0]);
    expect(all.filter((s) => s.payload.toString().startsWith("m"))).toHaveLength(5);
    await Promise.all([pub.endAsync(), back.endAsync()]);
  });

  it("a busy QoS 1 subscriber gets a run of stored messages longer than one pull window, in order, exactly once", async () => {
    // 700 messages: the window asks for at most 256 and asks again at half, so this needs
    // several overlapping pull requests to follow one another without a stall or a gap.
    const sub = await connectMqtt(gw.port("mqtt"), session("stored-busy"));
    await sub.subscribeAsync("orders/busy/1", { qos: 1 });
    const inbox = collect(sub);
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    // In chunks of 100: the gateway's receive maximum (256) bounds a client's unacknowledged publishes.
    for (let from = 0; from < 700; from += 100) {
      await Promise.all(
        Array.from({ length: 100 }, (_, k) => pub.publishAsync("orders/busy/1", `b${from + k}`, { qos: 1 })),
      );
    }
    const seen = await inbox.count(700, 15_000);
    expect(seen.map((m) => m.payload.toString())).toEqual(Array.from({ length: 700 }, (_, i) => `b${i}`));
    expect(seen.every((m) => m.packet.qos === 1)).toBe(true);
    await Promise.all([pub.endAsync(), sub.endAsync()]);
  });

  it("what the client did not acknowledge is delivered again after it reconnects", async () => {
    const raw = await RawMqtt.connected(gw.port("mqtt"), 5, {
      clientId: "no-ack",
      clean: false,
      properties: { sessionExpiryInterval: 600 },
    });
    raw.send({
      cmd: "subscribe",
      messageId: 1,
      subscriptions: [{ topic: "orders/noack/+", qos: 1 }],
    } as mqttPacket.Packet);
    await raw.next("suback");
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await pub.publishAsync("orders/noack/1", "first", { qos: 1 });
    const p = (await raw.next("publish")) as mqttPacket.IPublishPacket;
    expect(p.payload.toString()).toBe("first");
    raw.end(); // never acknowledged

    const { client: back, inbox } = await connectCollecting(gw.port("mqtt"), {
      ...session("no-ack"),
      resubscribe: false,
    });
    const [again] = await inbox.count(1);
    expect(again!.payload.toString()).toBe("first");
    await Promise.all([pub.endAsync(), back.endAsync()]);
  });

  it("two gateways sharing one sessions bucket: a QoS 1 subscriber moves and receives the stored messages exactly once", async () => {
    const other = await startGateway({ nats: nats.url, config });
    try {
      const sub = await connectMqtt(gw.port("mqtt"), session("mover"));
      await sub.subscribeAsync("orders/move/+", { qos: 1 });
      await sub.endAsync();
      const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
      for (let i = 0; i < 3; i++) await pub.publishAsync(`orders/move/${i}`, `x${i}`, { qos: 1 });
      const { client: moved, inbox } = await connectCollecting(other.port("mqtt"), {
        ...session("mover"),
        resubscribe: false,
      });
      expect(moved.connack.sessionPresent).toBe(true);
      const seen = await inbox.count(3);
      expect(seen.map((s) => s.payload.toString())).toEqual(["x0", "x1", "x2"]);
      await pub.publishAsync("orders/move/3", "x3", { qos: 1 });
      const more = await inbox.count(4);
      expect(more.map((s) => s.payload.toString())).toEqual(["x0", "x1", "x2", "x3"]);
      await Promise.all([pub.endAsync(), moved.endAsync()]);
    } finally {
      await other.stop();
    }
  });

  it("a session held on another gateway is taken over: the old connection gets 0x8E", async () => {
    const other = await startGateway({ nats: nats.url, config });
    try {
      const first = await RawMqtt.connected(gw.port("mqtt"), 5, {
        clientId: "contested",
        clean: false,
        properties: { sessionExpiryInterval: 600 },
      });
      const second = await connectMqtt(other.port("mqtt"), session("contested"));
      expect(((await first.next("disconnect")) as mqttPacket.IDisconnectPacket).reasonCode).toBe(0x8e);
      await second.endAsync();
    } finally {
      await other.stop();
    }
  });

  it("a clean start takes over a session another gateway holds, known from the bucket's writes, not a read", async () => {
    const other = await startGateway({ nats: nats.url, config });
    try {
      // The first connect makes `other` follow the sessions bucket; after that it reads the
      // bucket for a clean start only when it has seen a session of that client written.
      const warm = await connectMqtt(other.port("mqtt"), { protocolVersion: 5, clean: true });
      await warm.endAsync();
      const held = await RawMqtt.connected(gw.port("mqtt"), 5, {
        clientId: "roamer",
        clean: false,
        properties: { sessionExpiryInterval: 600 },
      });
      const clean = await connectMqtt(other.port("mqtt"), { protocolVersion: 5, clientId: "roamer", clean: true });
      expect(clean.connack.sessionPresent).toBe(false);
      expect(((await held.next("disconnect")) as mqttPacket.IDisconnectPacket).reasonCode).toBe(0x8e);
      await clean.endAsync();
    } finally {
      await other.stop();
    }
  });

  it("a gateway killed with SIGKILL mid-traffic: every PUBACKed message is in the stream", async () => {
    const victim = await startGateway({ nats: nats.url, config });
    const c = await RawMqtt.connected(victim.port("mqtt"), 5, { clientId: "sigkill" });
    const acked = new Set<number>();
    c.socket.on("data", () => {
      for (const p of c.packets.splice(0))
        if (p.cmd === "puback" && !(p as mqttPacket.IPubackPacket).reasonCode) acked.add(p.messageId!);
    });
    for (let id = 1; id <= 200; id++) {
      c.send({
        cmd: "publish",
        topic: `orders/kill/${id}`,
        payload: Buffer.from(String(id)),
        qos: 1,
        messageId: id,
        retain: false,
        dup: false,
      } as mqttPacket.Packet);
      if (id === 100) victim.process.kill("SIGKILL");
    }
    await c.waitClosed(10_000);
    await victim.stop();
    for (const id of acked) {
      const m = await jsm.streams.getMessage("ORDERS", { last_by_subj: `orders.kill.${id}` });
      expect(m?.string()).toBe(String(id));
    }
  });
});
