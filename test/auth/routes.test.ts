// Issue 13, finding 2: a route filled from client-chosen values must not reach the
// gateway's own subjects. A route `{a}.{b}.{c}` with a=$MQG b=alive c=<gateway id> and a
// takeover body kicked any client (0x8E); b=retained stored a forged retained message;
// the same through the AMQP relay and through a will. No auth here, as on the default.
import { connect, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient, send } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { publishesOf } from "../helpers/inbound.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const routes = [
  { subject: "r", template: "{a}.{b}.{c}" },
  { subject: "inbox", template: "_INBOX.{a}.{b}" },
];

describe("routes cannot build the gateway's own subjects", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let encoded: Subscription;
  const landed: string[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    gw = await startGateway({
      nats: nats.url,
      config: {
        mqtt: { listen: "127.0.0.1:0", routes },
        amqp: { listen: "127.0.0.1:0", routes },
        log: { level: "info", format: "json" },
      },
    });
    nc = await connect({ servers: nats.url });
    // Where the values land once encoded: an ordinary subject.
    encoded = nc.subscribe("%24MQG.>", { callback: (_e, m) => landed.push(m.subject) });
    await nc.flush();
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  const takeover = (clientId: string) =>
    Buffer.from(JSON.stringify({ takeover: { account: "$G", client_id: clientId } }));

  /** A connected victim that must stay connected: a PINGREQ after the attack still gets its PINGRESP. */
  async function victim(clientId: string): Promise<RawMqtt> {
    return RawMqtt.connected(gw.port("mqtt"), 5, { clientId });
  }
  /** The attack went somewhere: to the encoded subject (fixed) or to the victim (kicked). */
  const arrived = (v: RawMqtt, count: () => number, at: number) =>
    eventually(
      () => (count() > at || v.closed || v.packets.some((p) => p.cmd === "disconnect") ? true : undefined),
      10_000,
      "the attack's outcome",
    );
  const encodedCount = () => landed.filter((s) => s === `%24MQG.alive.${gw.id}`).length;
  async function stillConnected(v: RawMqtt): Promise<void> {
    expect(v.packets.filter((p) => p.cmd === "disconnect")).toEqual([]);
    v.send({ cmd: "pingreq" } as mqtt.Packet);
    await v.next("pingresp");
    expect(v.packets.filter((p) => p.cmd === "disconnect")).toEqual([]);
    expect(v.closed).toBe(false);
  }

  it("MQTT: a=$MQG b=alive c=<id> goes to %24MQG.alive.<id>, and the victim stays connected", async () => {
    const v = await victim("victim-mqtt");
    const c = await RawMqtt.connected(gw.port("mqtt"), 5);
    c.send({
      cmd: "publish",
      topic: "r",
      payload: takeover("victim-mqtt"),
      qos: 1,
      messageId: 1,
      retain: false,
      dup: false,
      properties: { userProperties: { a: "$MQG", b: "alive", c: gw.id } },
    } as mqtt.Packet);
    const at = encodedCount();
    expect(((await c.next("puback")) as mqtt.IPubackPacket).reasonCode ?? 0).toBe(0);
    await arrived(v, encodedCount, at);
    await stillConnected(v);
    c.end();
    v.end();
  });

  it("MQTT: values spelling the gateway's client inboxes are refused 0x87", async () => {
    const c = await RawMqtt.connected(gw.port("mqtt"), 5);
    c.send({
      cmd: "publish",
      topic: "inbox",
      payload: Buffer.from("{}"),
      qos: 1,
      messageId: 1,
      retain: false,
      dup: false,
      properties: { userProperties: { a: "MQGW", b: gw.id } },
    } as mqtt.Packet);
    expect(((await c.next("puback")) as mqtt.IPubackPacket).reasonCode).toBe(0x87);
    c.end();
  });

  it("MQTT: b=retained stores nothing a later # subscriber gets", async () => {
    const c = await RawMqtt.connected(gw.port("mqtt"), 5);
    // A retained message first: the gateway creates the retained stream on first use.
    c.send({
      cmd: "publish",
      topic: "legit/first",
      payload: Buffer.from("ok"),
      qos: 1,
      messageId: 3,
      retain: true,
      dup: false,
    } as mqtt.Packet);
    expect(((await c.next("puback")) as mqtt.IPubackPacket).reasonCode ?? 0).toBe(0);
    c.send({
      cmd: "publish",
      topic: "r",
      payload: Buffer.from("FORGED"),
      qos: 1,
      messageId: 1,
      retain: false,
      dup: false,
      properties: { userProperties: { a: "$MQG", b: "retained", c: "forged" } },
    } as mqtt.Packet);
    expect(((await c.next("puback")) as mqtt.IPubackPacket).reasonCode ?? 0).toBe(0);
    // A legitimate retained message after it: the retained read returns both in stream order.
    c.send({
      cmd: "publish",
      topic: "legit/x",
      payload: Buffer.from("ok"),
      qos: 1,
      messageId: 2,
      retain: true,
      dup: false,
    } as mqtt.Packet);
    expect(((await c.next("puback")) as mqtt.IPubackPacket).reasonCode ?? 0).toBe(0);
    const reader = await RawMqtt.connected(gw.port("mqtt"), 5);
    const got = publishesOf(reader);
    reader.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "#", qos: 0 }] } as mqtt.Packet);
    await reader.next("suback");
    await got.waitFor("legit/x");
    expect(got.payloads()).not.toContain("FORGED");
    c.end();
    reader.end();
  });

  it("AMQP relay: to=r with the same application properties does not kick; to=inbox with a=MQGW is rejected unauthorized-access", async () => {
    const v = await victim("victim-amqp");
    const a = await AmqpClient.open(gw.port("amqp"));
    const relay = await a.sender({ target: {} });
    const at = encodedCount();
    const outcome = await send(relay, {
      to: "r",
      application_properties: { a: "$MQG", b: "alive", c: gw.id },
      body: takeover("victim-amqp"),
    });
    expect(outcome.state).toBe("accepted");
    await arrived(v, encodedCount, at);
    await stillConnected(v);
    const refused = await send(relay, { to: "inbox", application_properties: { a: "MQGW", b: gw.id }, body: "x" });
    expect(refused).toMatchObject({ state: "rejected", error: { condition: "amqp:unauthorized-access" } });
    await a.close();
    v.end();
  });

  it("a will on route r with a=$MQG b=alive does not kick", async () => {
    const v = await victim("victim-will");
    const at = encodedCount();
    const w = await RawMqtt.connected(gw.port("mqtt"), 5, {
      will: {
        topic: "r",
        payload: takeover("victim-will"),
        qos: 1,
        retain: false,
        properties: { userProperties: { a: "$MQG", b: "alive", c: gw.id } },
      },
    } as Partial<mqtt.IConnectPacket>);
    w.end(); // an abnormal close: the will is owed
    await arrived(v, encodedCount, at);
    await stillConnected(v);
    v.end();
    encoded.unsubscribe();
  });
});
