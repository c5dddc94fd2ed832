// Issue 8, item 3: the limits of the config enforced, on both doors. Packet/frame sizes,
// CONNECT timeouts and slowloris are tested in test/mqtt/errors.test.ts, hostile.test.ts,
// test/amqp/hostile.test.ts and amqpHostile.test.ts here; this file has the counts.
import { type Socket, connect as tcpConnect } from "node:net";
import type mqtt from "mqtt-packet";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient, rhea, send } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";
import { metric } from "./util.js";

/** A client that got in (CONNACK 0), kept open; undefined when refused. */
async function tryConnectHeld(port: number): Promise<RawMqtt | undefined> {
  try {
    return await RawMqtt.connected(port, 5);
  } catch {
    return undefined;
  }
}

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
      // Sockets on different ports may be accepted in any order: poll until the three are
      // in (a client that gets in before them leaves at once).
      await eventually(
        async () => ((await tryConnect(gw.port("mqtt"), 5)) === "closed" ? true : undefined),
        5_000,
        "MQTT refused",
      );
      const before = await metric(gw, "mqgw_refused_total", { protocol: "amqp", reason: "max_connections" });
      await expect(AmqpClient.open(gw.port("amqp"))).rejects.toBeTruthy();
      expect((await metric(gw, "mqgw_refused_total", { protocol: "amqp", reason: "max_connections" })) - before).toBe(
        1,
      );
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

  describe("limits.max_connections: 3 counts sockets from accept to close, CONNECT / open finished or not", () => {
    // A gateway per test: sockets a test ended reach the gateway's count a moment later,
    // and must not take the next test's places.
    let gw: GatewayHandle | undefined;
    const start = async (connectTimeout = "10s") => {
      gw = await startGateway({
        nats: nats.url,
        // Raw sockets counted from accept: a silent socket must reach the listener itself,
        // not the strict tap, whose own connection to the gateway comes a moment later.
        amqpTap: false,
        config: {
          mqtt: { listen: "127.0.0.1:0", websocket: "127.0.0.1:0" },
          limits: { max_connections: 3, connect_timeout: connectTimeout },
          log: { level: "info", format: "json" },
        },
      });
      return gw;
    };
    afterEach(async () => {
      await gw?.stop();
      gw = undefined;
    });

    /** Ends a client; the gateway counts its socket out a moment later (fill() waits for that). */
    const leave = async (c: RawMqtt) => {
      c.send({ cmd: "disconnect" } as mqtt.Packet);
      await c.waitClosed();
    };
    /** `n` clients in at once (retried while places are still being given back). */
    const fill = (port: number, n: number) =>
      eventually(
        async () => {
          const got: RawMqtt[] = [];
          for (let i = 0; i < n; i++) {
            const c = await tryConnectHeld(port);
            if (!c) {
              for (const g of got) await leave(g);
              return undefined;
            }
            got.push(c);
          }
          return got;
        },
        5_000,
        `${n} clients in at once`,
      );

    /** A TCP socket that sends nothing (an MQTT or AMQP client that never says CONNECT / the AMQP header). */
    const idle = (port: number) =>
      new Promise<Socket>((resolve, reject) => {
        const s = tcpConnect(port, "127.0.0.1", () => resolve(s));
        s.once("error", reject);
      });
    const closedByGateway = (s: Socket) =>
      new Promise<void>((resolve) => (s.closed ? resolve() : s.once("close", () => resolve())));

    it("three silent sockets fill the gateway: a fourth MQTT client is refused; closing one lets a client in", async () => {
      const gw = await start();
      const silent = [await idle(gw.port("mqtt")), await idle(gw.port("mqtt")), await idle(gw.port("mqtt"))];
      for (const s of silent) s.on("error", () => {});
      const before = await metric(gw, "mqgw_refused_total", { protocol: "mqtt", reason: "max_connections" });
      expect(await tryConnect(gw.port("mqtt"), 5)).toBe("closed");
      expect((await metric(gw, "mqgw_refused_total", { protocol: "mqtt", reason: "max_connections" })) - before).toBe(
        1,
      );
      silent[0]!.destroy();
      await eventually(
        async () => ((await tryConnect(gw.port("mqtt"), 4)) === 0 ? true : undefined),
        5_000,
        "the freed place taken",
      );
      for (const s of silent) s.destroy();
    });

    it("silent sockets on the AMQP and WebSocket ports count too, for both doors", async () => {
      const gw = await start();
      const silent = [await idle(gw.port("amqp")), await idle(gw.port("mqtt_ws")), await idle(gw.port("mqtt"))];
      for (const s of silent) s.on("error", () => {});
      // Sockets on different ports may be accepted in any order: poll until the three are
      // in (a client that gets in before them leaves at once).
      await eventually(
        async () => ((await tryConnect(gw.port("mqtt"), 5)) === "closed" ? true : undefined),
        5_000,
        "MQTT refused",
      );
      const before = await metric(gw, "mqgw_refused_total", { protocol: "amqp", reason: "max_connections" });
      await expect(AmqpClient.open(gw.port("amqp"))).rejects.toBeTruthy();
      expect((await metric(gw, "mqgw_refused_total", { protocol: "amqp", reason: "max_connections" })) - before).toBe(
        1,
      );
      for (const s of silent) s.destroy();
    });

    it("each way a socket ends gives its place back exactly once: connect timeout, reset, protocol error, DISCONNECT", async () => {
      const gw = await start("1s");
      // 1. Silent sockets closed by the gateway at limits.connect_timeout.
      const silent = [await idle(gw.port("mqtt")), await idle(gw.port("amqp")), await idle(gw.port("mqtt_ws"))];
      for (const s of silent) s.on("error", () => {});
      await Promise.all(silent.map(closedByGateway));
      // 2. Served clients ending in three ways: a reset from the peer, bytes that are no
      // MQTT (the gateway closes), a DISCONNECT.
      const [a, b, c] = (await fill(gw.port("mqtt"), 3)) as [RawMqtt, RawMqtt, RawMqtt];
      a.socket.resetAndDestroy();
      b.sendBytes(Buffer.from([0x00, 0x00])); // packet type 0 is reserved: the gateway closes
      c.send({ cmd: "disconnect" } as mqtt.Packet);
      await b.waitClosed();
      await c.waitClosed();
      // Counted down once per socket: three places again, not fewer (a missed release) and
      // not more (a double one).
      const three = await fill(gw.port("mqtt"), 3);
      expect(await tryConnect(gw.port("mqtt"), 5)).toBe("closed");
      for (const m of three) await leave(m);
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
