import { connect, type NatsConnection, headers as natsHeaders } from "@nats-io/transport-node";
import type mqttPacket from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

describe("MQTT 5 features", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let port: number;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer();
    gw = await startGateway({ nats: nats.url });
    port = gw.port("mqtt");
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("No Local: a client does not get its own messages on a No Local subscription, others do", async () => {
    const me = await connectMqtt(port, { protocolVersion: 5, clientId: "nl-me" });
    const other = await connectMqtt(port, { protocolVersion: 5, clientId: "nl-other" });
    const mine = collect(me);
    const theirs = collect(other);
    await me.subscribeAsync("nl/t", { qos: 0, nl: true });
    await me.subscribeAsync("nl/marker", { qos: 0 });
    await other.subscribeAsync("nl/t", { qos: 0 });
    await me.publishAsync("nl/t", "own", { qos: 1 });
    await me.publishAsync("nl/marker", "after", { qos: 1 });
    await theirs.count(1);
    const seen = await mine.count(1);
    expect(seen.map((s) => s.topic)).toEqual(["nl/marker"]);
    await Promise.all([me.endAsync(), other.endAsync()]);
  });

  it("subscription identifiers: one copy carries every matching subscription's (test/mqtt/overlapping.test.ts has more)", async () => {
    const c = await connectMqtt(port, { protocolVersion: 5 });
    const inbox = collect(c);
    await c.subscribeAsync("sid/+", { qos: 0, properties: { subscriptionIdentifier: 7 } });
    await c.subscribeAsync("sid/#", { qos: 0, properties: { subscriptionIdentifier: 9 } });
    nc.publish("sid.a", "x");
    nc.publish("sid.a.b", "y");
    const seen = await inbox.count(2);
    expect(seen.map((s) => [s.payload.toString(), s.packet.properties?.subscriptionIdentifier])).toEqual([
      ["x", [7, 9]],
      ["y", 9],
    ]);
    await c.endAsync();
  });

  it("Retain As Published keeps RETAIN on live messages; without it RETAIN is cleared", async () => {
    const c = await connectMqtt(port, { protocolVersion: 5 });
    const inbox = collect(c);
    await c.subscribeAsync("rap/keep", { qos: 0, rap: true, rh: 2 });
    await c.subscribeAsync("rap/clear", { qos: 0, rh: 2 });
    const pub = await connectMqtt(port, { protocolVersion: 5 });
    await pub.publishAsync("rap/keep", "k", { qos: 1, retain: true });
    await pub.publishAsync("rap/clear", "c", { qos: 1, retain: true });
    const seen = await inbox.count(2);
    expect(Object.fromEntries(seen.map((s) => [s.topic, s.packet.retain]))).toEqual({
      "rap/keep": true,
      "rap/clear": false,
    });
    await pub.publishAsync("rap/keep", "", { qos: 1, retain: true });
    await pub.publishAsync("rap/clear", "", { qos: 1, retain: true });
    await Promise.all([c.endAsync(), pub.endAsync()]);
  });

  it("Retain Handling 2 sends no retained message on subscribe; 0 does", async () => {
    const pub = await connectMqtt(port, { protocolVersion: 5 });
    await pub.publishAsync("rh/t", "kept", { qos: 1, retain: true });
    const c = await connectMqtt(port, { protocolVersion: 5 });
    const inbox = collect(c);
    await c.subscribeAsync("rh/+", { qos: 0, rh: 2 });
    await c.subscribeAsync("rh/t", { qos: 0, rh: 0 });
    const [m] = await inbox.count(1);
    expect(m!.packet.retain).toBe(true);
    nc.publish("rh.t", "live");
    const all = await inbox.count(2);
    // The live message comes once for both subscriptions (overlapping.test.ts); the retained copy only for the rh 0 one.
    expect(all.map((s) => [s.payload.toString(), s.packet.retain])).toEqual([
      ["kept", true],
      ["live", false],
    ]);
    await pub.publishAsync("rh/t", "", { qos: 1, retain: true });
    await Promise.all([c.endAsync(), pub.endAsync()]);
  });

  it("an expired message is not delivered; the remaining interval is sent", async () => {
    const c = await connectMqtt(port, { protocolVersion: 5 });
    const inbox = collect(c);
    await c.subscribeAsync("exp/+", { qos: 0 });
    const old = natsHeaders();
    old.set("Mqgw-Expires", String(Date.now() - 1_000));
    nc.publish("exp.old", "stale", { headers: old });
    const fresh = natsHeaders();
    fresh.set("Mqgw-Expires", String(Date.now() + 30_000));
    nc.publish("exp.new", "fresh", { headers: fresh });
    const [m] = await inbox.count(1);
    expect(m!.topic).toBe("exp/new");
    expect(m!.packet.properties?.messageExpiryInterval).toBeGreaterThan(25);
    expect(m!.packet.properties?.messageExpiryInterval).toBeLessThanOrEqual(30);
    await c.endAsync();
  });

  it("payload format indicator 1 with invalid UTF-8: PUBACK 0x99", async () => {
    const c = await RawMqtt.connected(port, 5);
    c.send({
      cmd: "publish",
      topic: "pfi/t",
      payload: Buffer.from([0xff, 0xfe]),
      qos: 1,
      messageId: 2,
      retain: false,
      dup: false,
      properties: { payloadFormatIndicator: true },
    } as mqttPacket.Packet);
    expect(((await c.next("puback")) as mqttPacket.IPubackPacket).reasonCode).toBe(0x99);
    c.end();
  });

  it("topic aliases from the client are resolved; an unknown alias is a protocol error", async () => {
    const sub = nc.subscribe("alias.t", { max: 2 });
    await nc.flush();
    const c = await RawMqtt.connected(port, 5);
    c.send({
      cmd: "publish",
      topic: "alias/t",
      payload: Buffer.from("1"),
      qos: 1,
      messageId: 1,
      retain: false,
      dup: false,
      properties: { topicAlias: 3 },
    } as mqttPacket.Packet);
    await c.next("puback");
    c.send({
      cmd: "publish",
      topic: "",
      payload: Buffer.from("2"),
      qos: 1,
      messageId: 2,
      retain: false,
      dup: false,
      properties: { topicAlias: 3 },
    } as mqttPacket.Packet);
    await c.next("puback");
    const got: string[] = [];
    for await (const m of sub) got.push(m.string());
    expect(got).toEqual(["1", "2"]);
    c.send({
      cmd: "publish",
      topic: "",
      payload: Buffer.from("3"),
      qos: 0,
      retain: false,
      dup: false,
      properties: { topicAlias: 9 },
    } as mqttPacket.Packet);
    expect(((await c.next("disconnect")) as mqttPacket.IDisconnectPacket).reasonCode).toBe(0x82);
  });

  it("QoS 2 from a client is passed on exactly once, even when resent before PUBREL", async () => {
    const sub = nc.subscribe("qos2.once");
    const got: string[] = [];
    void (async () => {
      for await (const m of sub) got.push(m.string());
    })();
    await nc.flush();
    const c = await RawMqtt.connected(port, 5);
    const publish = (dup: boolean) =>
      c.send({
        cmd: "publish",
        topic: "qos2/once",
        payload: Buffer.from("x"),
        qos: 2,
        messageId: 5,
        retain: false,
        dup,
      } as mqttPacket.Packet);
    publish(false);
    await c.next("pubrec");
    publish(true);
    await c.next("pubrec");
    c.send({ cmd: "pubrel", messageId: 5 } as mqttPacket.Packet);
    await c.next("pubcomp");
    await nc.flush();
    expect(got).toEqual(["x"]);
    sub.unsubscribe();
    c.end();
  });

  it("QoS is the lower of the message's and the subscription's; outbound QoS 2 completes PUBREC/PUBREL/PUBCOMP", async () => {
    const c = await RawMqtt.connected(port, 5);
    c.send({
      cmd: "subscribe",
      messageId: 1,
      subscriptions: [
        { topic: "qmin/two", qos: 2 },
        { topic: "qmin/one", qos: 1 },
      ],
    } as mqttPacket.Packet);
    await c.next("suback");
    const h = natsHeaders();
    h.set("Mqgw-QoS", "2");
    nc.publish("qmin.one", "a", { headers: h });
    nc.publish("qmin.two", "b", { headers: h });
    const first = (await c.next("publish")) as mqttPacket.IPublishPacket;
    const second = (await c.next("publish")) as mqttPacket.IPublishPacket;
    const byTopic = Object.fromEntries([first, second].map((p) => [p.topic, p]));
    expect(byTopic["qmin/one"]!.qos).toBe(1);
    expect(byTopic["qmin/two"]!.qos).toBe(2);
    c.send({ cmd: "puback", messageId: byTopic["qmin/one"]!.messageId } as mqttPacket.Packet);
    c.send({ cmd: "pubrec", messageId: byTopic["qmin/two"]!.messageId } as mqttPacket.Packet);
    expect(((await c.next("pubrel")) as mqttPacket.IPubrelPacket).messageId).toBe(byTopic["qmin/two"]!.messageId);
    c.send({ cmd: "pubcomp", messageId: byTopic["qmin/two"]!.messageId } as mqttPacket.Packet);
    c.end();
  });

  it("request/reply: an MQTT 5 requester with a Response Topic gets a NATS service's answer", async () => {
    const service = nc.subscribe("svc.time", {
      callback: (_e, m) => {
        const replyTo = m.headers?.get("Mqgw-Reply-To") || m.reply!;
        const h = natsHeaders();
        h.set("Mqgw-Correlation-Id", m.headers?.get("Mqgw-Correlation-Id") ?? "");
        nc.publish(replyTo, "12:00", { headers: h });
      },
    });
    await nc.flush();
    const c = await connectMqtt(port, { protocolVersion: 5 });
    const inbox = collect(c);
    await c.subscribeAsync("replies/me", { qos: 0 });
    await c.publishAsync("svc/time", "", {
      qos: 0,
      properties: { responseTopic: "replies/me", correlationData: Buffer.from("r1") },
    });
    const [m] = await inbox.count(1);
    expect(m!.payload.toString()).toBe("12:00");
    expect(Buffer.from(m!.packet.properties!.correlationData!).toString()).toBe("r1");
    service.unsubscribe();
    await c.endAsync();
  });

  it("a NATS request reaches an MQTT 5 responder with the reply subject as Response Topic", async () => {
    const responder = await connectMqtt(port, { protocolVersion: 5 });
    responder.on("message", (_t, payload, packet) => {
      void responder.publishAsync(packet.properties!.responseTopic!, `pong:${payload}`, { qos: 0 });
    });
    await responder.subscribeAsync("rpc/ping", { qos: 0 });
    const reply = await nc.request("rpc.ping", "1", { timeout: 5_000 });
    expect(reply.string()).toBe("pong:1");
    await responder.endAsync();
  });

  it("messages larger than the client's Maximum Packet Size are not sent to it", async () => {
    const c = await connectMqtt(port, { protocolVersion: 5, properties: { maximumPacketSize: 200 } });
    const inbox = collect(c);
    await c.subscribeAsync("mps/+", { qos: 0 });
    nc.publish("mps.big", new Uint8Array(1_000));
    nc.publish("mps.small", "s");
    const [m] = await inbox.count(1);
    expect(m!.topic).toBe("mps/small");
    await c.endAsync();
  });
});
