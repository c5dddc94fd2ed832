// The core copy of a stored publish (issue 12 item 5) and a stored publish whose ack
// cannot come back (issue 13 item 6), seen from real MQTT and AMQP clients.
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqttPacket from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient, collect as collectAmqp, rhea, send } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

// `noinbox` may publish its subjects and use JetStream, but not subscribe to any inbox.
const serverConfig = `
authorization {
  users: [
    { user: open, password: open }
    { user: noinbox, password: noinbox, permissions: { publish: { allow: ["dev.>", "free.>", "$JS.API.>"] }, subscribe: { allow: ["dev.>", "free.>"] } } }
  ]
}
no_auth_user: open
`;

const publishQos1 = (c: RawMqtt, topic: string, payload: string, messageId: number) =>
  c.send({
    cmd: "publish",
    topic,
    payload: Buffer.from(payload),
    qos: 1,
    messageId,
    retain: false,
    dup: false,
  } as mqttPacket.Packet);

describe("stored copies and their replies", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startNatsServer({ config: serverConfig });
    nc = await connect({ servers: nats.url, user: "open", pass: "open" });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "DEV", subjects: ["dev.>"] });
    gw = await startGateway({ nats: nats.url, config: { bindings: [{ stream: "DEV" }] } });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("the live copy of a stored publish reaches MQTT 5 without a Response Topic and AMQP without a reply-to; one set by the publisher arrives", async () => {
    const mqttSub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await mqttSub.subscribeAsync("dev/reply/+", { qos: 0 });
    const mqttSeen = collect(mqttSub);
    const amqp = await AmqpClient.open(gw.port("amqp"), { container_id: "reply-rx" });
    const amqpSeen = collectAmqp(await amqp.receiver({ source: { address: "dev.reply.*" }, snd_settle_mode: 1 }));
    // The NATS side sees the stored publish's own reply (its JetStream ack inbox); that is NATS's business.
    const natsReplies: string[] = [];
    nc.subscribe("dev.reply.*", { callback: (_e, m) => natsReplies.push(m.reply ?? "") });
    await nc.flush();

    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await pub.publishAsync("dev/reply/plain", "no reply asked", { qos: 1 });
    await pub.publishAsync("dev/reply/asked", "reply here", { qos: 1, properties: { responseTopic: "answers/here" } });
    const sender = await amqp.sender("dev.reply.amqp");
    expect(await send(sender, { body: rhea.message.data_section(Buffer.from("from amqp")) })).toEqual({
      state: "accepted",
    });

    const seen = await mqttSeen.count(3);
    const byTopic = Object.fromEntries(seen.map((s) => [s.topic, s.packet.properties?.responseTopic]));
    expect(byTopic).toEqual({
      "dev/reply/plain": undefined,
      "dev/reply/asked": "answers/here",
      "dev/reply/amqp": undefined,
    });
    const received = await amqpSeen.take(3);
    const replyTo = Object.fromEntries(received.map((r) => [r.message.to, r.message.reply_to]));
    expect(replyTo).toEqual({
      "dev.reply.plain": undefined,
      "dev.reply.asked": "answers.here",
      "dev.reply.amqp": undefined,
    });
    expect(natsReplies.filter((r) => r !== "")).toHaveLength(3);
    await Promise.all([pub.endAsync(), mqttSub.endAsync(), amqp.close()]);
  });

  it("a stored publish by a client that may not subscribe its ack inbox is refused 0x87 with a reason, and not stored", async () => {
    const before = (await jsm.streams.info("DEV")).state.messages;
    const c = await RawMqtt.connected(gw.port("mqtt"), 5, { username: "noinbox", password: Buffer.from("noinbox") });
    publishQos1(c, "dev/noinbox/1", "x", 1);
    const ack = (await c.next("puback")) as mqttPacket.IPubackPacket;
    expect(ack.reasonCode).toBe(0x87);
    expect(String(ack.properties?.reasonString)).toMatch(/not authorized to subscribe to .*acknowledgement/);
    // Still refused on the next try, and still nothing stored.
    publishQos1(c, "dev/noinbox/1", "y", 2);
    expect(((await c.next("puback")) as mqttPacket.IPubackPacket).reasonCode).toBe(0x87);
    expect((await jsm.streams.info("DEV")).state.messages).toBe(before);
    c.end();

    // 3.1.1 has no negative PUBACK: the connection closes, and nothing is stored.
    const v4 = await RawMqtt.connected(gw.port("mqtt"), 4, { username: "noinbox", password: Buffer.from("noinbox") });
    publishQos1(v4, "dev/noinbox/2", "z", 1);
    await v4.waitClosed();
    expect(v4.packets.some((p) => p.cmd === "puback")).toBe(false);

    const amqp = await AmqpClient.open(gw.port("amqp"), {
      username: "noinbox",
      password: "noinbox",
      container_id: "noinbox",
    });
    const sender = await amqp.sender("dev.noinbox.3");
    const outcome = await send(sender, { body: rhea.message.data_section(Buffer.from("w")) });
    expect(outcome.state).toBe("rejected");
    expect(outcome.state === "rejected" && outcome.error.condition).toBe("amqp:unauthorized-access");
    expect((await jsm.streams.info("DEV")).state.messages).toBe(before);
    await amqp.close();
  });

  it("the same client still publishes QoS 1 to an unbound subject: the MQTT store's copy is written by the gateway user", async () => {
    const c = await RawMqtt.connected(gw.port("mqtt"), 5, { username: "noinbox", password: Buffer.from("noinbox") });
    publishQos1(c, "free/noinbox", "x", 1);
    expect(((await c.next("puback")) as mqttPacket.IPubackPacket).reasonCode ?? 0).toBe(0);
    c.end();
  });
});
