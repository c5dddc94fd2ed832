// Issue 26, item 2: the MQTT 5 CONNACK says what the gateway is configured to allow
// (docs/decisions/mqtt-capabilities.md), and PUBLISH, wills and SUBSCRIBE are held to it.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { runPython } from "../helpers/python.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const paho = (args: string[]) => runPython(join(import.meta.dirname, "clients", "paho_client.py"), args);
const reasonOf = async (c: RawMqtt) => ((await c.next("disconnect")) as mqtt.IDisconnectPacket).reasonCode;
const restricted = {
  maximum_qos: 1,
  retain_available: false,
  wildcard_subscription_available: false,
  shared_subscription_available: false,
  max_keepalive: "60s",
};

describe("MQTT 5 CONNACK capabilities, as configured", () => {
  let nats: NatsServerHandle;
  let full: GatewayHandle;
  let limited: GatewayHandle;

  beforeAll(async () => {
    nats = await startNatsServer();
    [full, limited] = await Promise.all([
      startGateway({ nats: nats.url }),
      startGateway({ nats: nats.url, config: { mqtt: { listen: "127.0.0.1:0", ...restricted } } }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([full?.stop(), limited?.stop()]);
    await nats?.stop();
  });

  it("by default: everything available, Maximum QoS absent (2), Server Keep Alive = max_keepalive for a client asking more", async () => {
    const c = await connectMqtt(full.port("mqtt"), { protocolVersion: 5, keepalive: 300 });
    const p = c.connack.properties ?? {};
    expect(p.maximumQoS).toBeUndefined();
    expect([p.retainAvailable, p.wildcardSubscriptionAvailable, p.sharedSubscriptionAvailable]).toEqual([
      true,
      true,
      true,
    ]);
    expect(p.subscriptionIdentifiersAvailable).toBe(true);
    expect(p.serverKeepAlive).toBe(120);
    await c.endAsync();
  });

  it("restricted: mqtt.js reads Maximum QoS 1, no retain, no wildcards, no shared subscriptions, Server Keep Alive 60", async () => {
    const c = await connectMqtt(limited.port("mqtt"), { protocolVersion: 5, keepalive: 120 });
    const p = c.connack.properties ?? {};
    expect(p.maximumQoS).toBe(1);
    expect([p.retainAvailable, p.wildcardSubscriptionAvailable, p.sharedSubscriptionAvailable]).toEqual([
      false,
      false,
      false,
    ]);
    expect(p.subscriptionIdentifiersAvailable).toBe(true);
    expect(p.serverKeepAlive).toBe(60);
    await c.endAsync();
  });

  it("restricted: paho reads the same CONNACK", async () => {
    const c = paho([String(limited.port("mqtt")), "--seconds", "0.2"]);
    const [connack] = await c.upTo(1);
    expect(connack).toMatchObject({
      connack: 0,
      properties: {
        MaximumQoS: 1,
        RetainAvailable: 0,
        WildcardSubscriptionAvailable: 0,
        SharedSubscriptionAvailable: 0,
      },
    });
  });

  it.each([5, 4] as const)(
    "restricted, MQTT %s: SUBSCRIBE is granted at most QoS 1; a wildcard or shared filter is refused",
    async (version) => {
      const c = await RawMqtt.connected(limited.port("mqtt"), version);
      c.send({
        cmd: "subscribe",
        messageId: 1,
        subscriptions: [
          { topic: `cap/v${version}`, qos: 2 },
          { topic: "cap/+", qos: 0 },
          { topic: `$share/g/cap/v${version}`, qos: 0 },
        ],
      } as mqtt.Packet);
      const { granted } = (await c.next("suback")) as mqtt.ISubackPacket;
      expect(granted).toEqual(version === 5 ? [1, 0xa2, 0x9e] : [1, 0x80, 0x80]);
      const pub = await connectMqtt(limited.port("mqtt"), { protocolVersion: 5 });
      await pub.publishAsync(`cap/v${version}`, "q1", { qos: 1 });
      const got = (await c.next("publish")) as mqtt.IPublishPacket;
      expect([got.payload.toString(), got.qos]).toEqual(["q1", 1]);
      await pub.endAsync();
      c.end();
    },
  );

  it("restricted: a QoS 2 PUBLISH is DISCONNECT 0x9B, a retained one 0x9A; MQTT 3.1.1 is closed", async () => {
    const port = limited.port("mqtt");
    const q2 = await RawMqtt.connected(port, 5);
    q2.send({
      cmd: "publish",
      topic: "cap/q2",
      payload: Buffer.from("x"),
      qos: 2,
      messageId: 1,
      retain: false,
      dup: false,
    });
    expect(await reasonOf(q2)).toBe(0x9b);
    await q2.waitClosed();
    const retained = await RawMqtt.connected(port, 5);
    retained.send({ cmd: "publish", topic: "cap/r", payload: Buffer.from("x"), qos: 0, retain: true, dup: false });
    expect(await reasonOf(retained)).toBe(0x9a);
    await retained.waitClosed();
    const v4 = await RawMqtt.connected(port, 4);
    v4.send({
      cmd: "publish",
      topic: "cap/q2",
      payload: Buffer.from("x"),
      qos: 2,
      messageId: 1,
      retain: false,
      dup: false,
    });
    await v4.waitClosed();
    expect(v4.packets.map((p) => p.cmd)).toEqual([]);
  });

  it("restricted: QoS 1 and unretained publishes still go through", async () => {
    const c = await connectMqtt(limited.port("mqtt"), { protocolVersion: 5 });
    const inbox = collect(c);
    await c.subscribeAsync("cap/ok", { qos: 1 });
    await c.publishAsync("cap/ok", "fine", { qos: 1 });
    expect((await inbox.count(1)).map((m) => [m.payload.toString(), m.packet.qos])).toEqual([["fine", 1]]);
    await c.endAsync();
  });

  it.each([
    { will: { qos: 2, retain: false }, v5: 0x9b, code: "0x9B" },
    { will: { qos: 0, retain: true }, v5: 0x9a, code: "0x9A" },
  ])(
    "restricted: a will of QoS $will.qos, retain $will.retain is refused at CONNECT (MQTT 5 $code, 3.1.1 code 5)",
    async ({ will, v5 }) => {
      for (const version of [5, 4] as const) {
        const c = await RawMqtt.open(limited.port("mqtt"), version);
        c.send({
          cmd: "connect",
          protocolId: "MQTT",
          protocolVersion: version,
          clientId: `cap-will-${version}`,
          clean: true,
          keepalive: 60,
          will: { topic: "cap/will", payload: Buffer.from("w"), ...will },
        } as mqtt.Packet);
        const ack = (await c.next("connack")) as mqtt.IConnackPacket;
        expect(version === 5 ? ack.reasonCode : ack.returnCode).toBe(version === 5 ? v5 : 5);
        await c.waitClosed();
      }
    },
  );

  it("a reload (SIGHUP) applies to clients that connect after it; a connected one keeps what its CONNACK said", async () => {
    const before = await RawMqtt.connected(full.port("mqtt"), 5);
    const config = parse(readFileSync(full.file, "utf8"));
    config.mqtt = { ...config.mqtt, retain_available: false, maximum_qos: 0 };
    writeFileSync(full.file, stringify(config));
    full.process.kill("SIGHUP");
    await full.waitForLog((l) => l.msg === "config reloaded");
    const after = await connectMqtt(full.port("mqtt"), { protocolVersion: 5 });
    expect([after.connack.properties?.retainAvailable, after.connack.properties?.maximumQoS]).toEqual([false, 0]);
    // The earlier connection still may publish retained at QoS 1: its PUBACK comes.
    before.send({
      cmd: "publish",
      topic: "cap/before",
      payload: Buffer.from(""),
      qos: 1,
      messageId: 1,
      retain: true,
      dup: false,
    });
    expect(((await before.next("puback")) as mqtt.IPubackPacket).reasonCode ?? 0).toBe(0);
    await after.endAsync();
    before.end();
  });
});
