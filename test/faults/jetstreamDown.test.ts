// Issue 8, item 1: JetStream unavailable. The bound stream was there when the gateway
// started; then its server came back without JetStream. Stored publishes are refused with
// the CONTRACT's answer, promptly (not hung); plain traffic and clean sessions go on.
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient, send } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";
import { within } from "./util.js";

/** The CONTRACT's answer must come well within this (the gateway's JetStream timeout is 5 s). */
const ANSWER_MS = 8_000;

describe("JetStream unavailable", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;

  beforeAll(async () => {
    nats = await startNatsServer();
    const nc = await connect({ servers: nats.url });
    await (await jetstreamManager(nc)).streams.add({ name: "ORDERS", subjects: ["orders.>"] });
    await nc.close();
    gw = await startGateway({
      nats: nats.url,
      config: { bindings: [{ stream: "ORDERS" }], log: { level: "info", format: "json" } },
    });
    // The same server comes back without JetStream.
    await nats.stop();
    nats = await startNatsServer({ port: nats.port, jetstream: false });
    await eventually(
      async () => ((await fetch(`http://127.0.0.1:${gw.port("http")}/healthz`)).status === 200 ? true : undefined),
      15_000,
      "the gateway back on NATS",
    );
  });
  afterAll(async () => {
    await gw?.stop();
    await nats?.stop();
  });

  it("MQTT 5: a QoS 1 stored publish gets PUBACK 0x80 with a reason string; an unstored one is acknowledged", async () => {
    const c = await RawMqtt.connected(gw.port("mqtt"), 5);
    c.send({
      cmd: "publish",
      topic: "orders/nojs/1",
      payload: Buffer.from("x"),
      qos: 1,
      messageId: 1,
      retain: false,
      dup: false,
    } as mqtt.Packet);
    const ack = (await within(c.next("puback", ANSWER_MS), ANSWER_MS, undefined)) as mqtt.IPubackPacket | undefined;
    expect(ack?.reasonCode).toBe(0x80);
    expect(ack?.properties?.reasonString).toMatch(/JetStream/);
    c.send({
      cmd: "publish",
      topic: "plain/nojs",
      payload: Buffer.from("x"),
      qos: 1,
      messageId: 2,
      retain: false,
      dup: false,
    } as mqtt.Packet);
    expect(((await c.next("puback")) as mqtt.IPubackPacket).reasonCode ?? 0).toBe(0);
    // QoS 2 is refused the same way, on PUBREC.
    c.send({
      cmd: "publish",
      topic: "orders/nojs/2",
      payload: Buffer.from("x"),
      qos: 2,
      messageId: 3,
      retain: false,
      dup: false,
    } as mqtt.Packet);
    expect(((await c.next("pubrec", ANSWER_MS)) as mqtt.IPubrecPacket).reasonCode).toBe(0x80);
    expect(c.closed).toBe(false);
    c.end();
  });

  it("MQTT 3.1.1: a QoS 1 stored publish closes the connection, without a PUBACK", async () => {
    const c = await RawMqtt.connected(gw.port("mqtt"), 4);
    c.send({
      cmd: "publish",
      topic: "orders/nojs/3",
      payload: Buffer.from("x"),
      qos: 1,
      messageId: 1,
      retain: false,
      dup: false,
    } as mqtt.Packet);
    await c.waitClosed(ANSWER_MS);
    expect(c.packets.filter((p) => p.cmd === "puback")).toEqual([]);
  });

  it("AMQP: an unsettled stored send is rejected amqp:internal-error", async () => {
    const a = await AmqpClient.open(gw.port("amqp"));
    const sender = await a.sender("orders.nojs.amqp");
    const outcome = await within(send(sender, { body: "x" }), ANSWER_MS, "no disposition");
    expect(outcome).toMatchObject({ state: "rejected", error: { condition: "amqp:internal-error" } });
    expect(a.conn.is_open()).toBe(true);
    await a.close();
  });

  it("a persistent session cannot be read: CONNACK 0x88 (v5) / 3 (3.1.1), promptly; a clean session connects", async () => {
    for (const [version, code] of [
      [5, 0x88],
      [4, 3],
    ] as const) {
      const c = await RawMqtt.open(gw.port("mqtt"), version);
      c.send({
        cmd: "connect",
        protocolId: "MQTT",
        protocolVersion: version,
        clientId: `nojs-session-${version}`,
        clean: false,
        keepalive: 30,
        ...(version === 5 ? { properties: { sessionExpiryInterval: 60 } } : {}),
      } as mqtt.Packet);
      const ack = (await c.next("connack", 15_000)) as mqtt.IConnackPacket;
      expect(version === 5 ? ack.reasonCode : ack.returnCode).toBe(code);
      await c.waitClosed();
    }
    const clean = await RawMqtt.connected(gw.port("mqtt"), 5);
    clean.end();
  });
});
