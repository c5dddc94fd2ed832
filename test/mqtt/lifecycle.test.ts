import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqttPacket from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

/** The next message on a subject, as text. */
async function nextOn(nc: NatsConnection, subject: string): Promise<() => Promise<string>> {
  const sub = nc.subscribe(subject, { max: 1 });
  await nc.flush();
  return async () => {
    for await (const m of sub) return m.string();
    throw new Error("subscription ended");
  };
}

describe("MQTT wills, retained messages and sessions", () => {
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

  const will = (topic: string, extra: Record<string, unknown> = {}) => ({
    topic,
    payload: Buffer.from("gone"),
    qos: 1 as const,
    retain: false,
    ...extra,
  });

  it("an abnormal close publishes the will", async () => {
    const got = await nextOn(nc, "wills.abrupt");
    const c = await RawMqtt.connected(port, 4, { clientId: "will-abrupt", will: will("wills/abrupt") });
    c.end();
    expect(await got()).toBe("gone");
  });

  it("a normal DISCONNECT discards the will; a v5 DISCONNECT 0x04 publishes it", async () => {
    const c = await RawMqtt.connected(port, 5, { clientId: "will-normal", will: will("wills/normal") });
    c.send({ cmd: "disconnect", reasonCode: 0 } as mqttPacket.Packet);
    await c.waitClosed();
    await gw.waitForLog((l) => l.msg === "MQTT connection closed" && l.client_id === "will-normal");
    expect(
      gw.logs.some(
        (l) => l.msg === "MQTT connection closed" && l.client_id === "will-normal" && l.reason === "DISCONNECT",
      ),
    ).toBe(true);

    const got = await nextOn(nc, "wills.asked");
    const d = await RawMqtt.connected(port, 5, { clientId: "will-asked", will: will("wills/asked") });
    d.send({ cmd: "disconnect", reasonCode: 0x04 } as mqttPacket.Packet);
    expect(await got()).toBe("gone");
  });

  it("a will with a delay is not sent when the client reconnects in time", async () => {
    const c = await RawMqtt.connected(port, 5, {
      clientId: "will-delayed",
      will: will("wills/delayed", { properties: { willDelayInterval: 30 } }),
      properties: { sessionExpiryInterval: 60 },
    });
    c.end();
    const again = await RawMqtt.connected(port, 5, {
      clientId: "will-delayed",
      clean: false,
      properties: { sessionExpiryInterval: 60 },
    });
    const closed = await gw.waitForLog((l) => l.msg === "MQTT connection closed" && l.client_id === "will-delayed");
    expect(closed.reason).toBe("will cancelled: client reconnected");
    again.end();
  });

  it("keep-alive expiry publishes the will", async () => {
    const got = await nextOn(nc, "wills.keepalive");
    const c = await RawMqtt.connected(port, 5, { clientId: "will-ka", keepalive: 1, will: will("wills/keepalive") });
    expect(((await c.next("disconnect")) as mqttPacket.IDisconnectPacket).reasonCode).toBe(0x8d);
    expect(await got()).toBe("gone");
  });

  it("retained messages: stored, delivered on subscribe through wildcards with RETAIN set, deleted by an empty payload", async () => {
    const pub = await connectMqtt(port, { protocolVersion: 5 });
    const natsSeen = await (async () => {
      const sub = nc.subscribe("status.line1", { max: 1 });
      await nc.flush();
      await pub.publishAsync("status/line1", "up", { qos: 1, retain: true });
      for await (const m of sub) return m;
    })();
    expect(natsSeen?.headers?.get("Mqgw-Mqtt-Retain")).toBe("true");
    await pub.publishAsync("status/line2", "down", { qos: 1, retain: true });

    const sub = await connectMqtt(port, { protocolVersion: 5 });
    const inbox = collect(sub);
    await sub.subscribeAsync("status/+", { qos: 1 });
    const seen = await inbox.count(2);
    expect(seen.map((s) => [s.topic, s.payload.toString(), s.packet.retain]).sort()).toEqual([
      ["status/line1", "up", true],
      ["status/line2", "down", true],
    ]);

    await pub.publishAsync("status/line1", "", { qos: 1, retain: true });
    const later = await connectMqtt(port, { protocolVersion: 4 });
    const laterInbox = collect(later);
    await later.subscribeAsync("status/#", { qos: 0 });
    const [only] = await laterInbox.count(1);
    expect([only!.topic, only!.payload.toString()]).toEqual(["status/line2", "down"]);
    await Promise.all([pub.endAsync(), sub.endAsync(), later.endAsync()]);
  });

  it("a session (clean start 0, expiry > 0) resumes with session present and its subscriptions", async () => {
    const first = await connectMqtt(port, {
      protocolVersion: 5,
      clientId: "resumer",
      clean: false,
      properties: { sessionExpiryInterval: 300 },
    });
    await first.subscribeAsync("resume/+", { qos: 0 });
    await first.endAsync();
    const second = await connectMqtt(port, {
      protocolVersion: 5,
      clientId: "resumer",
      clean: false,
      properties: { sessionExpiryInterval: 300 },
      resubscribe: false,
    });
    const inbox = collect(second);
    expect(second.connack.sessionPresent).toBe(true);
    nc.publish("resume.x", "back");
    const [m] = await inbox.count(1);
    expect(m!.payload.toString()).toBe("back");
    await second.endAsync();
    const fresh = await connectMqtt(port, { protocolVersion: 5, clientId: "resumer", clean: true });
    expect(fresh.connack.sessionPresent).toBe(false);
    await fresh.endAsync();
  });
});
