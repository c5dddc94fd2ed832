// Issue 8, item 4: no path through the gateway lets a client read or write a subject its
// NATS user may not. `narrow` may use only allowed.> (and _INBOX.>, and the JetStream API
// for the ALLOWED stream); `denier` may use everything but parts.private.>. Each path the
// gateway adds to plain NATS (retained messages, wills, shared subscriptions, stored
// delivery, operator queues, the anonymous relay, dynamic nodes, $MQG, the No Local
// header) is tried with them.
import { AckPolicy, type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient, bodyText, collect, rhea, send, sendSettled } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { publishesOf } from "../helpers/inbound.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const serverConfig = `
authorization {
  users: [
    { user: open, password: open }
    { user: narrow, password: narrow, permissions: {
        publish: { allow: ["allowed.>", "_INBOX.>", "$JS.API.INFO", "$JS.API.STREAM.INFO.ALLOWED", "$JS.API.CONSUMER.*.ALLOWED.>", "$JS.API.CONSUMER.MSG.NEXT.ALLOWED.>", "$JS.ACK.ALLOWED.>"] }
        subscribe: { allow: ["allowed.>", "_INBOX.>"] }
    } }
    { user: denier, password: denier, permissions: {
        publish: { allow: [">"], deny: ["parts.private.>", "$MQG.>"] }
        subscribe: { allow: [">"], deny: ["parts.private.>", "$MQG.>"] }
    } }
  ]
}
no_auth_user: open
`;

const narrow = { username: "narrow", password: Buffer.from("narrow") };
const denier = { username: "denier", password: Buffer.from("denier") };

/** PUBLISHes a raw client receives (acknowledged), by topic, leaving other packets for next(). */
const publishes = publishesOf;

describe("authorization cannot be bypassed through the gateway", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let port: number;

  beforeAll(async () => {
    nats = await startNatsServer({ config: serverConfig });
    nc = await connect({ servers: nats.url, user: "open", pass: "open" });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "SECRET", subjects: ["secret.>"] });
    await jsm.streams.add({ name: "ALLOWED", subjects: ["allowed.stored.>"] });
    await jsm.streams.add({ name: "PARTS", subjects: ["parts.>"] });
    gw = await startGateway({
      nats: nats.url,
      config: {
        bindings: [{ stream: "SECRET" }, { stream: "ALLOWED" }, { stream: "PARTS" }],
        log: { level: "info", format: "json" },
      },
    });
    port = gw.port("mqtt");
    // Retained messages an allowed user left: on a secret topic, on the bare `allowed`
    // level (outside allowed.>), on parts/private, and a harmless marker.
    const open = await RawMqtt.connected(port, 5, { username: "open", password: Buffer.from("open") });
    for (const topic of ["secret/x", "allowed", "allowed/ok", "parts/private/x", "parts/public/x"]) {
      open.send({
        cmd: "publish",
        topic,
        payload: Buffer.from(`retained ${topic}`),
        qos: 1,
        messageId: 1,
        retain: true,
        dup: false,
      } as mqtt.Packet);
      expect(((await open.next("puback")) as mqtt.IPubackPacket).reasonCode ?? 0).toBe(0);
    }
    open.end();
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  describe("retained messages", () => {
    it("narrow subscribing # and secret/#: refused (0x87), and no retained message leaks with the allowed filter beside them", async () => {
      const c = await RawMqtt.connected(port, 5, narrow);
      const inbox = publishes(c);
      c.send({
        cmd: "subscribe",
        messageId: 1,
        subscriptions: [
          { topic: "#", qos: 0 },
          { topic: "secret/#", qos: 0 },
          { topic: "+/x", qos: 0 },
          { topic: "allowed/+", qos: 0 },
        ],
      } as mqtt.Packet);
      expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0x87, 0x87, 0x87, 0]);
      await inbox.waitFor("allowed/ok");
      expect(inbox.topics()).toEqual(["allowed/ok"]);
      c.end();
    });

    it("narrow subscribing allowed/#: granted, but the retained message on the bare `allowed` level (NATS refuses that subject) is not sent", async () => {
      const c = await RawMqtt.connected(port, 5, narrow);
      const inbox = publishes(c);
      c.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "allowed/#", qos: 0 }] } as mqtt.Packet);
      expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0]);
      await inbox.waitFor("allowed/ok");
      expect(inbox.topics()).not.toContain("allowed");
      c.end();
    });

    it("denier subscribing # (NATS grants it and filters parts.private.> on delivery): the retained parts/private/x is not sent", async () => {
      const c = await RawMqtt.connected(port, 5, denier);
      const inbox = publishes(c);
      c.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "#", qos: 0 }] } as mqtt.Packet);
      expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0]);
      await inbox.waitFor("parts/public/x");
      await inbox.waitFor("secret/x");
      expect(inbox.topics()).not.toContain("parts/private/x");
      c.end();
    });
  });

  it("a will on secret/w (QoS 1, retained) is not published and not retained; one on allowed/w is", async () => {
    const watch = nc.subscribe("*.w");
    const seen: string[] = [];
    void (async () => {
      for await (const m of watch) seen.push(m.subject);
    })();
    await nc.flush();
    for (const topic of ["secret/w", "allowed/w"]) {
      const c = await RawMqtt.connected(port, 5, {
        ...narrow,
        clientId: `will-${topic.replace("/", "-")}`,
        will: { topic, payload: Buffer.from("bye"), qos: 1, retain: true },
      });
      c.end(); // an abnormal close: the will is owed
      await c.waitClosed();
    }
    // Both wills go out on narrow's one NATS connection, in order: allowed.w after secret.w.
    await eventually(() => (seen.includes("allowed.w") ? true : undefined), 10_000, "the allowed will");
    expect(seen).toEqual(["allowed.w"]);
    watch.unsubscribe();
    const probe = await RawMqtt.connected(port, 5, { username: "open", password: Buffer.from("open") });
    const inbox = publishes(probe);
    probe.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "+/w", qos: 0 }] } as mqtt.Packet);
    await probe.next("suback");
    await inbox.waitFor("allowed/w");
    expect(inbox.topics()).toEqual(["allowed/w"]);
    probe.end();
  });

  it("shared subscriptions: $share/g/secret/# is refused (0x87), $share/g/allowed/# granted", async () => {
    const c = await RawMqtt.connected(port, 5, narrow);
    c.send({
      cmd: "subscribe",
      messageId: 1,
      subscriptions: [
        { topic: "$share/g/secret/#", qos: 1 },
        { topic: "$share/g/allowed/#", qos: 1 },
      ],
    } as mqtt.Packet);
    expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0x87, 1]);
    c.end();
  });

  describe("stored (JetStream) delivery, read with the gateway's own user", () => {
    it("narrow's QoS 1 subscription on secret/# is refused, and nothing stored reaches it while it is being refused", async () => {
      const js = jetstream(nc);
      const h = headers();
      h.set("Mqgw-QoS", "1");
      let running = true;
      // The stream keeps getting secret messages while the subscription is tried.
      const feeding = (async () => {
        for (let i = 0; running; i++) await js.publish(`secret.s.${i % 5}`, "secret", { headers: h });
      })();
      const c = await RawMqtt.connected(port, 5, {
        ...narrow,
        clientId: "stored-secret",
        clean: false,
        properties: { sessionExpiryInterval: 60 },
      });
      const inbox = publishes(c);
      for (let i = 1; i <= 5; i++) {
        c.send({
          cmd: "subscribe",
          messageId: i,
          subscriptions: [
            { topic: "secret/s/+", qos: 1 },
            { topic: "allowed/stored/+", qos: 1 },
          ],
        } as mqtt.Packet);
        expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0x87, 1]);
      }
      // A message on the allowed stored subject marks "everything before it has been delivered".
      await js.publish("allowed.stored.mark", "mark", { headers: h });
      await inbox.waitFor("allowed/stored/mark");
      running = false;
      await feeding;
      expect(inbox.topics().filter((t) => t.startsWith("secret/"))).toEqual([]);
      c.end();
    });

    it("denier's QoS 1 subscription on parts/+/+ reads the PARTS stream, but parts/private/y is not delivered", async () => {
      const js = jetstream(nc);
      const h = headers();
      h.set("Mqgw-QoS", "1");
      const c = await RawMqtt.connected(port, 5, {
        ...denier,
        clientId: "stored-parts",
        clean: false,
        properties: { sessionExpiryInterval: 60 },
      });
      const inbox = publishes(c);
      c.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "parts/+/+", qos: 1, rh: 2 }] } as mqtt.Packet);
      expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([1]);
      await js.publish("parts.private.y", "private", { headers: h });
      await js.publish("parts.public.y", "public", { headers: h });
      await inbox.waitFor("parts/public/y");
      expect(inbox.topics()).not.toContain("parts/private/y");
      c.end();
    });
  });

  describe("$MQG", () => {
    it("MQTT: publish and subscribe under $MQG refused (0x87), the gateway's retained store included", async () => {
      const c = await RawMqtt.connected(port, 5, narrow);
      c.send({
        cmd: "publish",
        topic: "$MQG/alive/x",
        payload: Buffer.from("{}"),
        qos: 1,
        messageId: 1,
        retain: false,
        dup: false,
      } as mqtt.Packet);
      expect(((await c.next("puback")) as mqtt.IPubackPacket).reasonCode).toBe(0x87);
      c.send({
        cmd: "subscribe",
        messageId: 2,
        subscriptions: [
          { topic: "$MQG/retained/#", qos: 0 },
          { topic: "$MQG/#", qos: 0 },
        ],
      } as mqtt.Packet);
      expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0x87, 0x87]);
      c.end();
    });

    it("AMQP: a sender to, a receiver from, and a relayed message to $MQG are refused", async () => {
      const a = await AmqpClient.open(gw.port("amqp"), { username: "narrow", password: "narrow" });
      expect(await a.refused("sender", "$MQG.alive.x")).toMatchObject({ condition: "amqp:unauthorized-access" });
      expect(await a.refused("receiver", "$MQG.retained.>")).toMatchObject({ condition: "amqp:unauthorized-access" });
      const relay = await a.sender({ target: {} });
      expect(await send(relay, { to: "$MQG.alive.x", body: "x" })).toMatchObject({
        state: "rejected",
        error: { condition: "amqp:unauthorized-access" },
      });
      await a.close();
    });
  });

  describe("AMQP", () => {
    let a: AmqpClient;
    beforeAll(async () => {
      a = await AmqpClient.open(gw.port("amqp"), {
        username: "narrow",
        password: "narrow",
        container_id: "narrow-amqp",
      });
      await jsm.consumers.add("SECRET", {
        durable_name: "q",
        ack_policy: AckPolicy.Explicit,
        filter_subject: "secret.x",
      });
      await jetstream(nc).publish("secret.x", "in the queue");
    });
    afterAll(async () => {
      await a?.close();
    });

    it("an operator queue on a secret subject (secret.x::q) is refused, and its messages stay in the queue", async () => {
      const pending = (await jsm.consumers.info("SECRET", "q")).num_pending;
      expect(pending).toBeGreaterThan(0);
      const error = await a.refused("receiver", "secret.x::q");
      expect(error.condition).toMatch(/^amqp:(unauthorized-access|not-found)$/);
      // Nothing was taken from the queue: none delivered, none held. The pending count may only
      // grow (a loaded CI run once counted one more after the refusal than before it).
      const after = await jsm.consumers.info("SECRET", "q");
      expect([after.num_ack_pending, after.delivered.consumer_seq]).toEqual([0, 0]);
      expect(after.num_pending).toBeGreaterThanOrEqual(pending);
    });

    it("a stored source on a secret subject (the gateway would make a consumer) is refused", async () => {
      const error = await a.refused("receiver", "secret.x");
      expect(error.condition).toMatch(/^amqp:(unauthorized-access|internal-error)$/);
    });

    it("anonymous relay: to=secret.x is rejected unsettled (unauthorized-access) and dropped presettled; nothing reaches NATS or the stream", async () => {
      const before = (await jsm.streams.info("SECRET")).state.messages;
      const watch = nc.subscribe("secret.relay.>");
      let leaked = 0;
      void (async () => {
        for await (const _ of watch) leaked++;
      })();
      await nc.flush();
      const relay = await a.sender({ target: {} });
      expect(await send(relay, { to: "secret.relay.x", body: "x" })).toMatchObject({
        state: "rejected",
        error: { condition: "amqp:unauthorized-access" },
      });
      const settled = await a.sender({ target: {}, snd_settle_mode: 1 });
      await sendSettled(settled, { to: "secret.relay.y", body: "y" });
      // An allowed relayed message after them is the marker that they were handled.
      const mark = nc.subscribe("allowed.relay.mark", { max: 1 });
      await nc.flush();
      expect(await send(relay, { to: "allowed.relay.mark", body: "m" })).toEqual({ state: "accepted" });
      for await (const _ of mark) break;
      await nc.flush();
      expect(leaked).toBe(0);
      expect((await jsm.streams.info("SECRET")).state.messages).toBe(before);
      watch.unsubscribe();
    });

    it("dynamic nodes: a dynamic source or target is a fresh _INBOX subject; one that names an address besides is refused", async () => {
      expect(await a.refused("receiver", { source: { dynamic: true, address: "secret.x" } })).toMatchObject({
        condition: "amqp:invalid-field",
      });
      // rhea's typings want an address; a dynamic source has none.
      const r = await a.receiver({ source: { dynamic: true } as never });
      const address = (r.source as { address?: string }).address ?? "";
      expect(address).toMatch(/^_INBOX\./);
      const got = collect(r);
      nc.publish("secret.x", "must not arrive");
      nc.publish(address, "to the dynamic node");
      expect(bodyText((await got.next()).message)).toBe("to the dynamic node");
      expect(got.seen.map((m) => bodyText(m.message))).toEqual(["to the dynamic node"]);
      const s = await a.sender({ target: { dynamic: true } });
      expect((s.target as { address?: string }).address ?? "").toMatch(/^_INBOX\./);
    });
  });

  describe("a forged Mqgw-Mqtt-Client-Id", () => {
    it("from a NATS publisher it only decides No Local: the named client's No Local subscription skips it, its other subscription gets it", async () => {
      const victim = await RawMqtt.connected(port, 5, { ...narrow, clientId: "victim" });
      const inbox = publishes(victim);
      victim.send({
        cmd: "subscribe",
        messageId: 1,
        subscriptions: [{ topic: "allowed/nl", qos: 0, nl: true, rh: 2 }],
        properties: { subscriptionIdentifier: 1 },
      } as mqtt.Packet);
      await victim.next("suback");
      victim.send({
        cmd: "subscribe",
        messageId: 2,
        subscriptions: [{ topic: "allowed/+", qos: 0, rh: 2 }],
        properties: { subscriptionIdentifier: 2 },
      } as mqtt.Packet);
      await victim.next("suback");
      const h = headers();
      h.set("Mqgw-Mqtt-Client-Id", "victim");
      nc.publish("allowed.nl", "forged", { headers: h });
      nc.publish("allowed.nl", "plain");
      await eventually(() => (inbox.got.length >= 2 ? true : undefined), 5_000, "two messages");
      const copies = inbox.got.map((p) => `${p.payload.toString()}@${p.properties?.subscriptionIdentifier}`);
      // One copy per message (overlapping subscriptions): the No Local subscription (1)
      // does not count for the forged one; the other (2) does for both.
      expect(copies).toEqual(["forged@2", "plain@1,2"]);
      victim.end();
    });

    it("from an MQTT client it cannot be set: a user property of that name travels as Mqgw-Prop-*, and the real client id is sent", async () => {
      const got = nc.subscribe("allowed.forge", { max: 1 });
      await nc.flush();
      const c = await RawMqtt.connected(port, 5, { ...narrow, clientId: "honest" });
      c.send({
        cmd: "publish",
        topic: "allowed/forge",
        payload: Buffer.from("x"),
        qos: 1,
        messageId: 1,
        retain: false,
        dup: false,
        properties: { userProperties: { "Mqgw-Mqtt-Client-Id": "victim" } },
      } as mqtt.Packet);
      await c.next("puback");
      for await (const m of got) {
        expect(m.headers?.get("Mqgw-Mqtt-Client-Id")).toBe("honest");
        expect(m.headers?.get("Mqgw-Prop-Mqgw-Mqtt-Client-Id")).toBe("victim");
      }
      c.end();
    });
  });

  it.each([5, 4] as const)(
    "MQTT %s: narrow's QoS 1 publish to a stored subject NATS refuses is answered at once, not after the 5 s JetStream timeout (v5 PUBACK 0x87, 3.1.1 closed)",
    async (version) => {
      const before = (await jsm.streams.info("SECRET")).state.messages;
      const c = await RawMqtt.connected(port, version, narrow);
      const started = performance.now();
      c.send({
        cmd: "publish",
        topic: "secret/denied",
        payload: Buffer.from("denied"),
        qos: 1,
        messageId: 7,
        retain: false,
        dup: false,
      } as mqtt.Packet);
      if (version === 5) expect(((await c.next("puback")) as mqtt.IPubackPacket).reasonCode).toBe(0x87);
      else await c.waitClosed();
      // The stored publisher would give up at 5,000 ms: answered well before, from NATS's -ERR.
      expect(performance.now() - started).toBeLessThan(2_000);
      expect(c.packets.filter((p) => p.cmd === "puback" && p.reasonCode !== 0x87)).toEqual([]);
      expect((await jsm.streams.info("SECRET")).state.messages).toBe(before);
      c.end();
    },
  );

  it("narrow cannot write a subject it may not by any MQTT door: QoS 0 dropped, QoS 1 0x87, retained not stored", async () => {
    const watch = nc.subscribe("nope.w2");
    let leaked = 0;
    void (async () => {
      for await (const _ of watch) leaked++;
    })();
    await nc.flush();
    const c = await RawMqtt.connected(port, 5, narrow);
    c.send({
      cmd: "publish",
      topic: "nope/w2",
      payload: Buffer.from("q0"),
      qos: 0,
      retain: true,
      dup: false,
    } as mqtt.Packet);
    c.send({
      cmd: "publish",
      topic: "nope/w2",
      payload: Buffer.from("q1"),
      qos: 1,
      messageId: 1,
      retain: true,
      dup: false,
    } as mqtt.Packet);
    expect(((await c.next("puback")) as mqtt.IPubackPacket).reasonCode).toBe(0x87);
    c.end();
    const probe = await RawMqtt.connected(port, 5, { username: "open", password: Buffer.from("open") });
    const inbox = publishes(probe);
    probe.send({
      cmd: "subscribe",
      messageId: 1,
      subscriptions: [
        { topic: "nope/w2", qos: 0 },
        { topic: "allowed/ok", qos: 0 },
      ],
    } as mqtt.Packet);
    await probe.next("suback");
    await inbox.waitFor("allowed/ok");
    expect(inbox.topics()).toEqual(["allowed/ok"]);
    await nc.flush();
    expect(leaked).toBe(0);
    watch.unsubscribe();
    probe.end();
    void rhea;
  });
});
