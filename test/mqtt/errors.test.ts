import { connect, type NatsConnection } from "@nats-io/transport-node";
import mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

// A nats-server with users: NATS, not the gateway, decides what each client may do.
const serverConfig = `
authorization {
  users: [
    { user: open, password: open }
    { user: narrow, password: narrow, permissions: { publish: { allow: ["allowed.>", "_INBOX.>", "$JS.API.>"] }, subscribe: { allow: ["allowed.>", "_INBOX.>"] } } }
  ]
}
no_auth_user: open
`;

describe("MQTT error answers (CONTRACT error table)", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let port: number;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer({ config: serverConfig });
    gw = await startGateway({
      nats: nats.url,
      config: {
        mqtt: {
          listen: "127.0.0.1:0",
          max_packet_size: "4KiB",
          routes: [{ subject: "orders", template: "orders.{region}" }],
        },
      },
    });
    port = gw.port("mqtt");
    nc = await connect({ servers: nats.url, user: "open", pass: "open" });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  const puback = async (c: RawMqtt, topic: string, qos: 1 | 2 = 1, properties?: Record<string, unknown>) => {
    c.send({
      cmd: "publish",
      topic,
      payload: Buffer.from("x"),
      qos,
      messageId: 7,
      retain: false,
      dup: false,
      ...(properties ? { properties } : {}),
    } as mqtt.Packet);
    return (await c.next(qos === 1 ? "puback" : "pubrec")) as mqtt.IPubackPacket;
  };

  it.each([
    ["whitespace", "bad topic/x"],
    ["a + in a publish topic", "a/+/b"],
    ["a level of only *", "a/*/b"],
    ["a level of only >", "a/>"],
  ])("v5 QoS 1 publish with %s: PUBACK 0x90", async (_name, topic) => {
    const c = await RawMqtt.connected(port, 5);
    expect((await puback(c, topic)).reasonCode).toBe(0x90);
    c.end();
  });

  it("v5 QoS 2 publish to a bad topic: PUBREC 0x90", async () => {
    const c = await RawMqtt.connected(port, 5);
    expect((await puback(c, "a/#", 2)).reasonCode).toBe(0x90);
    c.end();
  });

  it("v5 QoS 0 publish to a bad topic: DISCONNECT 0x90", async () => {
    const c = await RawMqtt.connected(port, 5);
    c.send({
      cmd: "publish",
      topic: "bad topic",
      payload: Buffer.from("x"),
      qos: 0,
      retain: false,
      dup: false,
    } as mqtt.Packet);
    expect(((await c.next("disconnect")) as mqtt.IDisconnectPacket).reasonCode).toBe(0x90);
    await c.waitClosed();
  });

  it("3.1.1 QoS 1 publish to a bad topic: the connection is closed", async () => {
    const c = await RawMqtt.connected(port, 4);
    c.send({
      cmd: "publish",
      topic: "bad topic",
      payload: Buffer.from("x"),
      qos: 1,
      messageId: 1,
      retain: false,
      dup: false,
    } as mqtt.Packet);
    await c.waitClosed();
    expect(c.packets.filter((p) => p.cmd === "puback")).toEqual([]);
  });

  it("bad filters: SUBACK 0x8F (v5) and 0x80 (3.1.1); good filters in the same SUBSCRIBE are granted", async () => {
    for (const [version, failure] of [
      [5, 0x8f],
      [4, 0x80],
    ] as const) {
      const c = await RawMqtt.connected(port, version);
      c.send({
        cmd: "subscribe",
        messageId: 3,
        subscriptions: [
          { topic: "a/*/b", qos: 1 },
          { topic: "ok/+", qos: 1 },
          { topic: "a#", qos: 0 },
        ],
      } as mqtt.Packet);
      expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([failure, 1, failure]);
      c.end();
    }
  });

  it("$MQG is refused: PUBACK 0x87 and SUBACK 0x87 (v5), SUBACK 0x80 (3.1.1)", async () => {
    const c = await RawMqtt.connected(port, 5);
    expect((await puback(c, "$MQG/admin/ping/info")).reasonCode).toBe(0x87);
    c.send({ cmd: "subscribe", messageId: 4, subscriptions: [{ topic: "$MQG/#", qos: 0 }] } as mqtt.Packet);
    expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0x87]);
    c.end();
    const c4 = await RawMqtt.connected(port, 4);
    c4.send({ cmd: "subscribe", messageId: 4, subscriptions: [{ topic: "$MQG/admin/#", qos: 0 }] } as mqtt.Packet);
    expect(((await c4.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0x80]);
    c4.end();
  });

  it("NATS permission denied: PUBACK 0x87 / SUBACK 0x87 (v5); close (3.1.1 QoS 1); allowed subjects still work", async () => {
    const c = await RawMqtt.connected(port, 5, { username: "narrow", password: Buffer.from("narrow") });
    expect((await puback(c, "forbidden/x")).reasonCode).toBe(0x87);
    expect((await puback(c, "allowed/x")).reasonCode ?? 0).toBe(0);
    c.send({
      cmd: "subscribe",
      messageId: 5,
      subscriptions: [
        { topic: "forbidden/#", qos: 0 },
        { topic: "allowed/#", qos: 0 },
      ],
    } as mqtt.Packet);
    expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0x87, 0]);
    c.end();
    const c4 = await RawMqtt.connected(port, 4, { username: "narrow", password: Buffer.from("narrow") });
    c4.send({
      cmd: "publish",
      topic: "forbidden/y",
      payload: Buffer.from("x"),
      qos: 1,
      messageId: 9,
      retain: false,
      dup: false,
    } as mqtt.Packet);
    await c4.waitClosed();
    expect(c4.packets.filter((p) => p.cmd === "puback")).toEqual([]);
  });

  it("bad credentials: CONNACK 0x86 (v5) and 4 (3.1.1)", async () => {
    for (const [version, code] of [
      [5, 0x86],
      [4, 4],
    ] as const) {
      const c = await RawMqtt.open(port, version);
      c.send({
        cmd: "connect",
        protocolId: "MQTT",
        protocolVersion: version,
        clientId: "bad-creds",
        clean: true,
        keepalive: 10,
        username: "open",
        password: Buffer.from("wrong"),
      } as mqtt.Packet);
      const ack = (await c.next("connack")) as mqtt.IConnackPacket;
      expect(version === 5 ? ack.reasonCode : ack.returnCode).toBe(code);
      await c.waitClosed();
    }
  });

  it("route property missing: PUBACK 0x83 with a reason string naming it; present: routed", async () => {
    const c = await RawMqtt.connected(port, 5);
    const refused = await puback(c, "orders");
    expect(refused.reasonCode).toBe(0x83);
    expect(refused.properties?.reasonString).toContain("region");
    const sub = nc.subscribe("orders.*", { max: 1 });
    await nc.flush();
    const ok = await puback(c, "orders", 1, { userProperties: { region: "eu west" } });
    expect(ok.reasonCode ?? 0).toBe(0);
    for await (const m of sub) expect(m.subject).toBe("orders.eu%20west");
    c.end();
  });

  it("packet too large: DISCONNECT 0x95, and the gateway stays up", async () => {
    const c = await RawMqtt.connected(port, 5);
    c.send({
      cmd: "publish",
      topic: "big",
      payload: Buffer.alloc(8 * 1024),
      qos: 0,
      retain: false,
      dup: false,
    } as mqtt.Packet);
    expect(((await c.next("disconnect")) as mqtt.IDisconnectPacket).reasonCode).toBe(0x95);
    await c.waitClosed();
    const again = await RawMqtt.connected(port, 5);
    again.end();
  });

  it("an oversize length prefix is refused from its first bytes", async () => {
    const c = await RawMqtt.connected(port, 5);
    // PUBLISH with a remaining length of 200 MB and nothing after it.
    c.sendBytes(Buffer.from([0x30, 0xff, 0xff, 0xff, 0x7f]));
    expect(((await c.next("disconnect")) as mqtt.IDisconnectPacket).reasonCode).toBe(0x95);
    await c.waitClosed();
  });

  it("keep alive expired: DISCONNECT 0x8D after 1.5 x keep alive", async () => {
    const c = await RawMqtt.connected(port, 5, { keepalive: 1 });
    expect(((await c.next("disconnect", 5_000)) as mqtt.IDisconnectPacket).reasonCode).toBe(0x8d);
    await c.waitClosed();
  });

  it("protocol level 3 (MQIsdp) is refused with CONNACK 1 and closed", async () => {
    const c = await RawMqtt.open(port, 4);
    c.send({
      cmd: "connect",
      protocolId: "MQIsdp",
      protocolVersion: 3,
      clientId: "old",
      clean: true,
      keepalive: 10,
    } as mqtt.Packet);
    expect(((await c.next("connack")) as mqtt.IConnackPacket).returnCode).toBe(1);
    await c.waitClosed();
  });

  it("a packet before CONNECT, and a second CONNECT, close the connection", async () => {
    const c = await RawMqtt.open(port, 4);
    c.send({ cmd: "pingreq" });
    await c.waitClosed();
    const d = await RawMqtt.connected(port, 5);
    d.send({
      cmd: "connect",
      protocolId: "MQTT",
      protocolVersion: 5,
      clientId: "again",
      clean: true,
      keepalive: 10,
    } as mqtt.Packet);
    expect(((await d.next("disconnect")) as mqtt.IDisconnectPacket).reasonCode).toBe(0x82);
    await d.waitClosed();
  });

  it("an empty client id: v5 gets an assigned one; 3.1.1 with clean session 0 gets CONNACK 2", async () => {
    const c = await RawMqtt.open(port, 5);
    c.send({
      cmd: "connect",
      protocolId: "MQTT",
      protocolVersion: 5,
      clientId: "",
      clean: true,
      keepalive: 10,
    } as mqtt.Packet);
    const ack = (await c.next("connack")) as mqtt.IConnackPacket;
    expect(ack.reasonCode).toBe(0);
    expect(ack.properties?.assignedClientIdentifier).toMatch(/^mqgw-/);
    c.end();
    const d = await RawMqtt.open(port, 4);
    // mqtt-packet will not write this CONNECT (clean session 0, no client id), so the bytes are spelled out.
    d.sendBytes(Buffer.from([0x10, 0x0c, 0x00, 0x04, 0x4d, 0x51, 0x54, 0x54, 0x04, 0x00, 0x00, 0x0a, 0x00, 0x00]));
    expect(((await d.next("connack")) as mqtt.IConnackPacket).returnCode).toBe(2);
    await d.waitClosed();
  });

  it("the same client id connecting again: the first gets DISCONNECT 0x8E", async () => {
    const first = await RawMqtt.connected(port, 5, { clientId: "twice" });
    const second = await RawMqtt.connected(port, 5, { clientId: "twice" });
    expect(((await first.next("disconnect")) as mqtt.IDisconnectPacket).reasonCode).toBe(0x8e);
    await first.waitClosed();
    second.send({ cmd: "pingreq" });
    await second.next("pingresp");
    second.end();
  });

  it("receive maximum exceeded: DISCONNECT 0x93", async () => {
    const small = await startGateway({
      nats: nats.url,
      config: { mqtt: { listen: "127.0.0.1:0", receive_maximum: 2 } },
    });
    try {
      const c = await RawMqtt.connected(small.port("mqtt"), 5, { username: "narrow", password: Buffer.from("narrow") });
      // Three QoS 2 publishes in one write (three writes may reach the gateway after the
      // first one's PUBREC: Nagle holds them until the first is acknowledged); the third
      // is one too many.
      const publish = (id: number) =>
        mqtt.generate(
          {
            cmd: "publish",
            topic: "allowed/q",
            payload: Buffer.from("x"),
            qos: 2,
            messageId: id,
            retain: false,
            dup: false,
          },
          { protocolVersion: 5 },
        );
      c.sendBytes(Buffer.concat([publish(1), publish(2), publish(3)]));
      expect(((await c.next("disconnect")) as mqtt.IDisconnectPacket).reasonCode).toBe(0x93);
    } finally {
      await small.stop();
    }
  });
});
