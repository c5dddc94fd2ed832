// Issue 8, item 3: the limits of the config enforced, on both doors. Packet/frame sizes,
// CONNECT timeouts and slowloris are tested in test/mqtt/errors.test.ts, hostile.test.ts,
// test/amqp/hostile.test.ts and amqpHostile.test.ts here; this file has the counts.
import type mqtt from "mqtt-packet";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient, rhea, send } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";
import { metric } from "./util.js";

/** A CONNECT on a fresh socket: the CONNACK's code, or "closed" when the gateway shut the socket first. */
async function tryConnect(port: number, version: 4 | 5): Promise<number | "closed"> {
  const c = await RawMqtt.open(port, version);
  c.send({
    cmd: "connect",
    protocolId: "MQTT",
    protocolVersion: version,
    clientId: `lim-${Math.random().toString(16).slice(2)}`,
    clean: true,
    keepalive: 30,
  } as mqtt.Packet);
  try {
    const ack = (await c.next("connack")) as mqtt.IConnackPacket;
    const code = (version === 5 ? ack.reasonCode : ack.returnCode) ?? 0;
    if (code !== 0) await c.waitClosed();
    c.end();
    return code;
  } catch {
    return "closed";
  }
}

describe("limits", () => {
  let nats: NatsServerHandle;
  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false });
  });
  afterAll(async () => {
    await nats?.stop();
  });

  describe("limits.max_connections: 3", () => {
    let gw: GatewayHandle;
    beforeAll(async () => {
      gw = await startGateway({
        nats: nats.url,
        config: { limits: { max_connections: 3 }, log: { level: "info", format: "json" } },
      });
    });
    afterAll(async () => {
      await gw?.stop();
    });

    it("counts MQTT and AMQP clients together; the one too many is closed at once, and a freed place is taken again", async () => {
      const held = [await RawMqtt.connected(gw.port("mqtt"), 5), await RawMqtt.connected(gw.port("mqtt"), 4)];
      const amqp = await AmqpClient.open(gw.port("amqp"));
      const before = await metric(gw, "mqgw_refused_total", { reason: "max_connections" });
      expect(await tryConnect(gw.port("mqtt"), 5)).toBe("closed");
      await expect(AmqpClient.open(gw.port("amqp"))).rejects.toBeTruthy();
      expect((await metric(gw, "mqgw_refused_total", { reason: "max_connections" })) - before).toBe(2);
      held[0]!.end();
      await eventually(
        async () => ((await tryConnect(gw.port("mqtt"), 5)) === 0 ? true : undefined),
        5_000,
        "the freed place taken",
      );
      // The clients that were in stay served.
      held[1]!.send({ cmd: "pingreq" });
      await held[1]!.next("pingresp");
      expect(await send(await amqp.sender("lim.x"), { body: "x" })).toEqual({ state: "accepted" });
      held[1]!.end();
      await amqp.close();
    });
  });

  describe("per account, subscriptions and topic levels", () => {
    let gw: GatewayHandle;
    // The per-account limit of 2 is shared by every test here: each starts once the last one's clients are gone.
    afterEach(async () => {
      await eventually(
        async () => ((await metric(gw, "mqgw_connections")) === 0 ? true : undefined),
        10_000,
        "the clients gone",
      );
    });
    beforeAll(async () => {
      gw = await startGateway({
        nats: nats.url,
        config: {
          limits: { max_connections_per_account: 2, max_subscriptions_per_client: 3, max_topic_levels: 4 },
          log: { level: "info", format: "json" },
        },
      });
    });
    afterAll(async () => {
      await gw?.stop();
    });

    it("limits.max_connections_per_account: 2: the third MQTT client of the account gets CONNACK 0x97 (v5) / 3 (3.1.1); AMQP clients count", async () => {
      const a = await RawMqtt.connected(gw.port("mqtt"), 5);
      const amqp = await AmqpClient.open(gw.port("amqp"));
      expect(await tryConnect(gw.port("mqtt"), 5)).toBe(0x97);
      expect(await tryConnect(gw.port("mqtt"), 4)).toBe(3);
      a.end();
      await eventually(
        async () => ((await tryConnect(gw.port("mqtt"), 4)) === 0 ? true : undefined),
        5_000,
        "a place again",
      );
      await amqp.close();
    });

    it("limits.max_connections_per_account: 2: a third AMQP client of the account gets its open answered by a close amqp:resource-limit-exceeded (with and without SASL)", async () => {
      const held = [await RawMqtt.connected(gw.port("mqtt"), 5), await RawMqtt.connected(gw.port("mqtt"), 5)];
      const before = await metric(gw, "mqgw_refused_total", {
        protocol: "amqp",
        reason: "max_connections_per_account",
      });
      try {
        // No SASL layer, then SASL ANONYMOUS (rhea's choice for a username without a password).
        expect(await refusedOpen(gw.port("amqp"), {})).toMatchObject({ condition: "amqp:resource-limit-exceeded" });
        expect(await refusedOpen(gw.port("amqp"), { username: "trace" })).toMatchObject({
          condition: "amqp:resource-limit-exceeded",
          description: expect.stringContaining("2 connections"),
        });
        expect(
          (await metric(gw, "mqgw_refused_total", { protocol: "amqp", reason: "max_connections_per_account" })) -
            before,
        ).toBe(2);
      } finally {
        for (const h of held) h.end();
      }
      // A place again: an AMQP client is served.
      const ok = await eventually(
        async () => {
          if ((await metric(gw, "mqgw_connections")) > 0) return undefined;
          return AmqpClient.open(gw.port("amqp"));
        },
        5_000,
        "a place again",
      );
      expect(await send(await ok.sender("lim.after"), { body: "x" })).toEqual({ state: "accepted" });
      await ok.close();
    });

    it("limits.max_subscriptions_per_client: 3: MQTT SUBACK 0x97 (v5) / 0x80 (3.1.1) past it; re-subscribing a held filter is no new one", async () => {
      const c = await RawMqtt.connected(gw.port("mqtt"), 5);
      c.send({
        cmd: "subscribe",
        messageId: 1,
        subscriptions: ["s/1", "s/2", "s/3", "s/4"].map((topic) => ({ topic, qos: 0 })),
      } as mqtt.Packet);
      expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0, 0, 0, 0x97]);
      c.send({ cmd: "subscribe", messageId: 2, subscriptions: [{ topic: "s/1", qos: 1 }] } as mqtt.Packet);
      expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([1]);
      c.send({ cmd: "unsubscribe", messageId: 3, unsubscriptions: ["s/2"] } as mqtt.Packet);
      await c.next("unsuback");
      c.send({ cmd: "subscribe", messageId: 4, subscriptions: [{ topic: "s/5", qos: 0 }] } as mqtt.Packet);
      expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0]);
      c.end();
      const c4 = await RawMqtt.connected(gw.port("mqtt"), 4);
      c4.send({
        cmd: "subscribe",
        messageId: 1,
        subscriptions: ["s/1", "s/2", "s/3", "s/4"].map((topic) => ({ topic, qos: 0 })),
      } as mqtt.Packet);
      expect(((await c4.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0, 0, 0, 0x80]);
      c4.end();
    });

    it("limits.max_subscriptions_per_client: 3: the fourth AMQP receiving link is refused amqp:resource-limit-exceeded", async () => {
      const c = await AmqpClient.open(gw.port("amqp"));
      for (let i = 0; i < 3; i++) await c.receiver(`sub.${i}`);
      expect(await c.refused("receiver", "sub.3")).toMatchObject({ condition: "amqp:resource-limit-exceeded" });
      await c.close();
    });

    it("limits.max_topic_levels: 4: MQTT PUBACK 0x90 and SUBACK 0x8F past it (v5); 3.1.1 closed on publish, SUBACK 0x80", async () => {
      const c = await RawMqtt.connected(gw.port("mqtt"), 5);
      c.send({
        cmd: "publish",
        topic: "a/b/c/d",
        payload: Buffer.from("x"),
        qos: 1,
        messageId: 1,
        retain: false,
        dup: false,
      } as mqtt.Packet);
      expect(((await c.next("puback")) as mqtt.IPubackPacket).reasonCode ?? 0).toBe(0);
      c.send({
        cmd: "publish",
        topic: "a/b/c/d/e",
        payload: Buffer.from("x"),
        qos: 1,
        messageId: 2,
        retain: false,
        dup: false,
      } as mqtt.Packet);
      expect(((await c.next("puback")) as mqtt.IPubackPacket).reasonCode).toBe(0x90);
      c.send({
        cmd: "subscribe",
        messageId: 3,
        subscriptions: [
          { topic: "a/+/c/#", qos: 0 },
          { topic: "a/b/c/d/#", qos: 0 },
        ],
      } as mqtt.Packet);
      expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0, 0x8f]);
      c.end();
      const c4 = await RawMqtt.connected(gw.port("mqtt"), 4);
      c4.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "a/b/c/d/e", qos: 0 }] } as mqtt.Packet);
      expect(((await c4.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0x80]);
      c4.send({
        cmd: "publish",
        topic: "a/b/c/d/e",
        payload: Buffer.from("x"),
        qos: 1,
        messageId: 2,
        retain: false,
        dup: false,
      } as mqtt.Packet);
      await c4.waitClosed();
      expect(c4.packets.filter((p) => p.cmd === "puback")).toEqual([]);
    });

    it("limits.max_topic_levels: 4: AMQP addresses of five tokens are refused amqp:invalid-field (targets, sources, queues, the relay's to)", async () => {
      const c = await AmqpClient.open(gw.port("amqp"));
      try {
        await expect(c.sender("a.b.c.d.e")).rejects.toMatchObject({ condition: "amqp:invalid-field" });
        expect(await c.refused("receiver", "a.b.c.d.e")).toMatchObject({ condition: "amqp:invalid-field" });
        expect(await c.refused("receiver", "a.b.c.*.>")).toMatchObject({ condition: "amqp:invalid-field" });
        expect(await c.refused("receiver", "a.b.c.d.e::q")).toMatchObject({ condition: "amqp:invalid-field" });
        // Four tokens are fine, as is a wildcard source of four.
        const four = await c.sender("a.b.c.d");
        expect(await send(four, { body: "x" })).toEqual({ state: "accepted" });
        await c.receiver("a.b.*.>");
        const relay = await c.sender({ target: {} });
        expect(await send(relay, { to: "a.b.c.d.e", body: "x" })).toMatchObject({
          state: "rejected",
          error: { condition: "amqp:invalid-field" },
        });
        expect(await send(relay, { to: "a.b.c.d", body: "x" })).toEqual({ state: "accepted" });
      } finally {
        await c.close();
      }
    });
  });
});

/** Opens an AMQP connection the gateway should refuse: the error of the close that follows its open. */
function refusedOpen(
  port: number,
  options: Record<string, unknown>,
): Promise<{ condition?: string; description?: string }> {
  const conn = rhea.create_container().connect({ host: "127.0.0.1", port, reconnect: false, ...options } as never);
  conn.on("error", () => {});
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no close within 10 s")), 10_000);
    const done = () => {
      clearTimeout(timer);
      resolve((conn.error as { condition?: string; description?: string } | undefined) ?? { condition: "none" });
    };
    conn.once("connection_error", done);
    conn.once("connection_close", done);
    conn.once("disconnected", done);
  });
}
