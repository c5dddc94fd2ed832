// Issue 13, finding 5: one client's long subject must not kill a NATS connection others
// share. nats-server closes a connection whose protocol line passes max_control_line
// (4 KiB by default); clients with the same credentials share one, and a client id's KV
// key rides the gateway user's. So topics, filters, addresses and client ids too long for
// the line are refused with the CONTRACT's answer before anything reaches NATS. And
// partial CONNECTs are bounded in total across sockets (limits.max_connect_buffer).
import { type Socket, connect as tcpConnect } from "node:net";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient, send } from "../amqp/rheaClient.js";
import { metric } from "../faults/util.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const serverConfig = `
authorization { users: [ { user: shared, password: shared }, { user: gw, password: gw } ] }
`;
const shared = { username: "shared", password: Buffer.from("shared") };
const long = (n: number) => `t/${"x".repeat(n)}`;

describe("lengths NATS cannot take are refused before they reach it", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;

  beforeAll(async () => {
    nats = await startNatsServer({ config: serverConfig });
    gw = await startGateway({
      nats: nats.url,
      config: {
        gateway_users: { G: { user: "gw", password: "gw" } },
        routing: [{ username: "*", account: "G" }],
        log: { level: "info", format: "json" },
      },
    });
  });
  afterAll(async () => {
    if (process.env.DEBUG_LOGS)
      console.log(
        gw?.logs
          .slice(-15)
          .map((l) => JSON.stringify(l).slice(0, 600))
          .join("\n"),
      );
    await gw?.stop();
    await nats?.stop();
  });

  async function qos1(c: RawMqtt, topic: string, id: number): Promise<number> {
    c.send({
      cmd: "publish",
      topic,
      payload: Buffer.from("p"),
      qos: 1,
      messageId: id,
      retain: false,
      dup: false,
    } as mqtt.Packet);
    return ((await c.next("puback")) as mqtt.IPubackPacket).reasonCode ?? 0;
  }

  it("a 5,000-character topic: PUBACK 0x90 for the attacker, and the bystander sharing its NATS connection is never refused", async () => {
    const attacker = await RawMqtt.connected(gw.port("mqtt"), 5, shared);
    const bystander = await RawMqtt.connected(gw.port("mqtt"), 5, shared);
    for (let i = 1; i <= 20; i++) {
      expect(await qos1(attacker, long(5_000), i)).toBe(0x90);
      expect(await qos1(bystander, "t/ok", i)).toBe(0);
    }
    // A subject just inside the limit goes through (the limit is not needlessly tight).
    expect(await qos1(attacker, long(3_500), 21)).toBe(0);
    attacker.end();
    bystander.end();
  });

  it("a 5,000-character filter: SUBACK 0x8F (v5) and 0x80 (3.1.1), not granted", async () => {
    const v5 = await RawMqtt.connected(gw.port("mqtt"), 5, shared);
    v5.send({
      cmd: "subscribe",
      messageId: 1,
      subscriptions: [
        { topic: `${long(5_000)}/#`, qos: 0 },
        { topic: "t/ok", qos: 0 },
      ],
    } as mqtt.Packet);
    expect(((await v5.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0x8f, 0]);
    const v4 = await RawMqtt.connected(gw.port("mqtt"), 4, shared);
    v4.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: long(5_000), qos: 1 }] } as mqtt.Packet);
    expect(((await v4.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0x80]);
    // The shared connection is still up: a publish through it is acknowledged.
    expect(await qos1(v5, "t/ok", 2)).toBe(0);
    v5.end();
    v4.end();
  });

  it("a 5,000-character persistent client id: CONNACK 0x85 (v5) / 2 (3.1.1), and other persistent clients connect", async () => {
    for (let i = 0; i < 5; i++) {
      const bad = await RawMqtt.open(gw.port("mqtt"), 5);
      bad.send({
        cmd: "connect",
        protocolId: "MQTT",
        protocolVersion: 5,
        clientId: "c".repeat(5_000),
        clean: false,
        keepalive: 60,
        properties: { sessionExpiryInterval: 60 },
        ...shared,
      } as mqtt.Packet);
      expect(((await bad.next("connack")) as mqtt.IConnackPacket).reasonCode).toBe(0x85);
      const bad4 = await RawMqtt.open(gw.port("mqtt"), 4);
      bad4.send({
        cmd: "connect",
        protocolId: "MQTT",
        protocolVersion: 4,
        clientId: "c".repeat(5_000),
        clean: false,
        keepalive: 60,
        ...shared,
      } as mqtt.Packet);
      expect(((await bad4.next("connack")) as mqtt.IConnackPacket).returnCode).toBe(2);
      const good = await RawMqtt.connected(gw.port("mqtt"), 5, {
        ...shared,
        clientId: `persistent-${i}`,
        clean: false,
        properties: { sessionExpiryInterval: 60 },
      });
      good.end();
    }
  });

  it("AMQP: a 5,000-character target is detached invalid-field; a relay to one is rejected; the connection's other links carry on", async () => {
    const a = await AmqpClient.open(gw.port("amqp"), { username: "shared", password: "shared" });
    expect(await a.refused("sender", { target: { address: `t.${"x".repeat(5_000)}` } })).toMatchObject({
      condition: "amqp:invalid-field",
    });
    expect(await a.refused("receiver", { source: { address: `t.${"x".repeat(5_000)}` } })).toMatchObject({
      condition: "amqp:invalid-field",
    });
    const relay = await a.sender({ target: {} });
    expect(await send(relay, { to: `t.${"x".repeat(5_000)}`, body: "x" })).toMatchObject({
      state: "rejected",
      error: { condition: "amqp:invalid-field" },
    });
    expect(await send(relay, { to: "t.ok", reply_to: `r.${"x".repeat(5_000)}`, body: "x" })).toMatchObject({
      state: "rejected",
      error: { condition: "amqp:invalid-field" },
    });
    expect(await send(relay, { to: "t.ok", body: "x" })).toMatchObject({ state: "accepted" });
    await a.close();
  });
});

describe("nats.max_control_line follows the server's", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;

  beforeAll(async () => {
    nats = await startNatsServer({ config: `max_control_line: 16KB\n${serverConfig}` });
    gw = await startGateway({
      nats: nats.url,
      config: {
        nats: { max_control_line: "16KiB" },
        gateway_users: { G: { user: "gw", password: "gw" } },
        routing: [{ username: "*", account: "G" }],
      },
    });
  });
  afterAll(async () => {
    await gw?.stop();
    await nats?.stop();
  });

  it("raised on both: a 10,000-character topic is published and received; past the raised line it is refused 0x90", async () => {
    const sub = await RawMqtt.connected(gw.port("mqtt"), 5, shared);
    sub.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "t/#", qos: 0 }] } as mqtt.Packet);
    await sub.next("suback");
    const pub = await RawMqtt.connected(gw.port("mqtt"), 5, shared);
    pub.send({
      cmd: "publish",
      topic: long(10_000),
      payload: Buffer.from("p"),
      qos: 1,
      messageId: 1,
      retain: false,
      dup: false,
    } as mqtt.Packet);
    expect(((await pub.next("puback")) as mqtt.IPubackPacket).reasonCode ?? 0).toBe(0);
    expect(((await sub.next("publish")) as mqtt.IPublishPacket).topic).toBe(long(10_000));
    pub.send({
      cmd: "publish",
      topic: long(20_000),
      payload: Buffer.from("p"),
      qos: 1,
      messageId: 2,
      retain: false,
      dup: false,
    } as mqtt.Packet);
    expect(((await pub.next("puback")) as mqtt.IPubackPacket).reasonCode).toBe(0x90);
    pub.end();
    sub.end();
  });
});

describe("partial CONNECTs are bounded in total (limits.max_connect_buffer)", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  beforeAll(async () => {
    nats = await startNatsServer();
    gw = await startGateway({
      nats: nats.url,
      config: { limits: { max_connect_buffer: "1MiB" }, log: { level: "info", format: "json" } },
    });
  });
  afterAll(async () => {
    await gw?.stop();
    await nats?.stop();
  });

  it("partial CONNECTs are bounded in total: sockets past limits.max_connect_buffer are closed, a normal client still connects", async () => {
    // A CONNECT header claiming 900 KiB, then most of it: each socket holds ~600 KiB.
    const header = Buffer.from([0x10, 0x80, 0x90, 0x37]); // remaining length 900,096
    const sockets: Socket[] = [];
    const closed: boolean[] = [];
    for (let i = 0; i < 4; i++) {
      const s = await new Promise<Socket>((resolve) => {
        const sock = tcpConnect(gw.port("mqtt"), "127.0.0.1", () => resolve(sock));
      });
      s.on("error", () => {});
      s.on("close", () => (closed[i] = true));
      s.write(Buffer.concat([header, Buffer.alloc(600 * 1024)]));
      sockets.push(s);
    }
    // 1 MiB takes one such socket; the others are closed as their bytes arrive.
    await eventually(() => (closed.filter(Boolean).length >= 3 ? true : undefined), 10_000, "sockets closed");
    expect(await metric(gw, "mqgw_refused_total", { reason: "connect_buffer_full" })).toBeGreaterThanOrEqual(3);
    const ok = await RawMqtt.connected(gw.port("mqtt"), 5);
    ok.end();
    for (const s of sockets) s.destroy();
    // Closed sockets give their share back: as many again fit now.
    await eventually(
      async () => {
        const s = await new Promise<Socket>((resolve) => {
          const sock = tcpConnect(gw.port("mqtt"), "127.0.0.1", () => resolve(sock));
        });
        let gone = false;
        s.on("error", () => {});
        s.on("close", () => (gone = true));
        s.write(Buffer.concat([header, Buffer.alloc(600 * 1024)]));
        const c = await RawMqtt.connected(gw.port("mqtt"), 5);
        c.end();
        const alive = !gone;
        s.destroy();
        return alive ? true : undefined;
      },
      10_000,
      "a place back",
    );
  });
});
