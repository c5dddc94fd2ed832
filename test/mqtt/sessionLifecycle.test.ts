import { spawn } from "node:child_process";
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqttPacket from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sessionKey } from "../../src/actors/mqtt/kvSessionStore.js";
import { type GatewayHandle, startEmbeddedGateway, startGateway } from "../helpers/gateway.js";
import { collect, connectCollecting, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";
import { storeConsumers } from "../helpers/storeConsumers.js";

/** Lets wall-clock time pass: a session expiry is a duration, not an event to wait on. */
const letTimePass = (ms: number) => new Promise((r) => setTimeout(r, ms));

const v5session = (clientId: string, expiry: number) => ({
  protocolVersion: 5 as const,
  clientId,
  clean: false,
  properties: { sessionExpiryInterval: expiry },
});

/** Keys holding a session now (nats.js `keys()` also lists keys whose record expired: the server's marker). A client's key is base64url, never with a dot (the sweeper's lock has one). */
async function sessionKeys(nc: NatsConnection, bucket = "MQGW_SESSIONS"): Promise<string[]> {
  const kv = await new Kvm(nc).open(bucket);
  const keys: string[] = [];
  for await (const k of await kv.keys()) if (!k.includes(".") && (await kv.get(k))?.operation === "PUT") keys.push(k);
  return keys;
}

describe("MQTT session lifecycle on the embedded default: one client id, one session, in order", () => {
  let gw: GatewayHandle & { natsUrl: string };
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const keys = () => sessionKeys(nc);
  /** The sessions' consumers on the MQTT store (no binding here: every topic is kept there). */
  const consumers = () => storeConsumers(jsm);

  beforeAll(async () => {
    gw = await startEmbeddedGateway();
    nc = await connect({ servers: gw.natsUrl });
    jsm = await jetstreamManager(nc);
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
  });

  it("200 quick connect/disconnect cycles of one client id leave no orphan consumer or session key", async () => {
    // Persistent sessions with a stored subscription alternate with clean starts, each
    // connecting the moment the one before has sent its DISCONNECT (or dropped its socket).
    for (let i = 0; i < 200; i++) {
      const persistent = i % 2 === 0;
      const c = await RawMqtt.connected(gw.port("mqtt"), 5, {
        clientId: "flapper",
        clean: !persistent,
        properties: persistent ? { sessionExpiryInterval: 60 } : {},
      });
      if (persistent) {
        c.send({
          cmd: "subscribe",
          messageId: 1,
          subscriptions: [{ topic: "plant/flap/#", qos: 1 }],
        } as mqttPacket.Packet);
        await c.next("suback");
      }
      if (i % 3 === 0) c.socket.destroy();
      else c.send({ cmd: "disconnect", reasonCode: 0 } as mqttPacket.Packet);
    }
    // The last cycle was a clean start: nothing of any of them remains.
    const last = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, clientId: "flapper", clean: true });
    expect(last.connack.sessionPresent).toBe(false);
    await last.endAsync();
    await eventually(
      async () => ((await keys()).includes(Buffer.from("flapper").toString("base64url")) ? undefined : true),
      10_000,
      "no session key",
    );
    await eventually(async () => ((await consumers()).length === 0 ? true : undefined), 10_000, "no consumer left");
  });

  it("[MQTT-3.8.4-3] a filter subscribed again reads on with its consumer: no second one, none left behind", async () => {
    const { client, inbox } = await connectCollecting(gw.port("mqtt"), v5session("resubscriber", 600));
    await client.subscribeAsync("plant/resub/#", { qos: 1 });
    const first = await storeConsumers(jsm, "plant.resub");
    await client.subscribeAsync("plant/resub/#", { qos: 1 });
    await client.publishAsync("plant/resub/x", "after", { qos: 1 });
    await inbox.count(1);
    expect(inbox.seen.map((m) => m.payload.toString())).toEqual(["after"]);
    expect(await storeConsumers(jsm, "plant.resub")).toEqual(first);
    await client.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
  });

  it("[MQTT-3.8.4-3] a device that resumes and subscribes again at once gets every message kept while it was away", async () => {
    const session = { clientId: "resubscribing-device", clean: false, properties: { sessionExpiryInterval: 600 } };
    const before = await RawMqtt.connected(gw.port("mqtt"), 5, session);
    const subscribe = { cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "plant/backlog/#", qos: 1 }] };
    before.send(subscribe as mqttPacket.Packet);
    await before.next("suback");
    before.send({ cmd: "disconnect", reasonCode: 0 } as mqttPacket.Packet);
    await before.waitClosed();
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    for (let i = 0; i < 100; i++) await pub.publishAsync("plant/backlog/x", String(i), { qos: 1 });
    await pub.endAsync();

    const back = await RawMqtt.open(gw.port("mqtt"), 5);
    const got: string[] = [];
    back.socket.on("data", () => {
      for (
        let k = back.packets.findIndex((p) => p.cmd === "publish");
        k >= 0;
        k = back.packets.findIndex((p) => p.cmd === "publish")
      ) {
        const p = back.packets.splice(k, 1)[0] as mqttPacket.IPublishPacket;
        got.push(p.payload.toString());
        back.send({ cmd: "puback", messageId: p.messageId, reasonCode: 0 } as mqttPacket.Packet);
      }
    });
    // CONNECT and SUBSCRIBE in one write, as devices that always subscribe do.
    back.send({
      cmd: "connect",
      protocolId: "MQTT",
      protocolVersion: 5,
      keepalive: 60,
      ...session,
    } as mqttPacket.Packet);
    back.send({ ...subscribe, messageId: 2 } as mqttPacket.Packet);
    expect(((await back.next("connack")) as mqttPacket.IConnackPacket).sessionPresent).toBe(true);
    await back.next("suback");
    await eventually(() => (got.length >= 100 ? true : undefined), 10_000, `100 messages (got ${got.length})`);
    expect(got).toEqual(Array.from({ length: 100 }, (_, i) => String(i)));
    expect(await storeConsumers(jsm, "plant.backlog")).toHaveLength(1);
    back.send({ cmd: "disconnect", reasonCode: 0, properties: { sessionExpiryInterval: 0 } } as mqttPacket.Packet);
  });

  it("MQTT 5 3.14.2.2.2: a DISCONNECT's Session Expiry Interval replaces the CONNECT's", async () => {
    const longer = await connectMqtt(gw.port("mqtt"), v5session("extends", 1));
    await longer.subscribeAsync("plant/extends/#", { qos: 1 });
    await longer.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 5 } });
    // Past the CONNECT's 1 s, within the DISCONNECT's 5 s.
    await letTimePass(2_000);
    const back = await connectMqtt(gw.port("mqtt"), { ...v5session("extends", 5), resubscribe: false });
    expect(back.connack.sessionPresent).toBe(true);
    // Ended by DISCONNECT with 0: nothing to come back to.
    await back.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
    const after = await connectMqtt(gw.port("mqtt"), v5session("extends", 5));
    expect(after.connack.sessionPresent).toBe(false);
    await after.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
  });

  it("[MQTT-3.14.2-2] raising the expiry on DISCONNECT after 0 at CONNECT is a protocol error, and the session ends", async () => {
    const c = await RawMqtt.connected(gw.port("mqtt"), 5, { clientId: "raiser", clean: true });
    c.send({ cmd: "disconnect", reasonCode: 0, properties: { sessionExpiryInterval: 60 } } as mqttPacket.Packet);
    expect(((await c.next("disconnect")) as mqttPacket.IDisconnectPacket).reasonCode).toBe(0x82);
    const back = await connectMqtt(gw.port("mqtt"), v5session("raiser", 60));
    expect(back.connack.sessionPresent).toBe(false);
    await back.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
  });

  it("MQTT 5 3.1.3.2.2: a will outlives neither its delay nor its session (Session Expiry 0, Will Delay 5: at the drop)", async () => {
    const watcher = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await watcher.subscribeAsync("plant/wills/#", { qos: 1 });
    const inbox = collect(watcher);
    const dying = await RawMqtt.connected(gw.port("mqtt"), 5, {
      clientId: "short-lived",
      clean: true,
      will: {
        topic: "plant/wills/short",
        payload: Buffer.from("gone"),
        qos: 1,
        retain: false,
        properties: { willDelayInterval: 5 },
      },
    });
    dying.socket.destroy();
    // Well before the will delay: the session ended at the drop, and took the will's wait with it.
    const [will] = await inbox.count(1, 3_000);
    expect(will!.payload.toString()).toBe("gone");
    await watcher.endAsync();
  });

  it("a resumed subscriber gets what it left unacknowledged first, then the rest, in the order stored (MQTT 4.6)", async () => {
    // mqtt.js that never acknowledges: it holds m1 when its connection drops.
    const holder = await connectMqtt(gw.port("mqtt"), v5session("orderly", 3600));
    await holder.subscribeAsync("plant/order/line", { qos: 1 });
    const held = new Promise<void>((resolve) => {
      holder.handleMessage = (_packet, _done) => resolve();
    });
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await pub.publishAsync("plant/order/line", "m1", { qos: 1 });
    await held;
    holder.end(true);
    for (let i = 2; i <= 6; i++) await pub.publishAsync("plant/order/line", `m${i}`, { qos: 1 });
    const { client: back, inbox } = await connectCollecting(gw.port("mqtt"), {
      ...v5session("orderly", 3600),
      resubscribe: false,
    });
    expect(back.connack.sessionPresent).toBe(true);
    const seen = await inbox.count(6);
    expect(seen.map((s) => s.payload.toString())).toEqual(["m1", "m2", "m3", "m4", "m5", "m6"]);
    // [MQTT-4.4.0-1] the one it held comes again with DUP set.
    expect(seen[0]!.packet.dup).toBe(true);
    await Promise.all([
      pub.endAsync(),
      back.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } }),
    ]);
  });

  it("[MQTT-4.4.0-1] what a client left unacknowledged comes again within 1 s of its reconnect (QoS 1 and 2, DUP set)", async () => {
    // A client that takes both and acknowledges neither (no PUBACK, no PUBREC).
    const holder = await RawMqtt.connected(gw.port("mqtt"), 5, {
      clientId: "prompt",
      clean: false,
      properties: { sessionExpiryInterval: 600 },
    });
    holder.send({
      cmd: "subscribe",
      messageId: 1,
      subscriptions: [{ topic: "prompt/+", qos: 2 }],
    } as mqttPacket.Packet);
    await holder.next("suback");
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await pub.publishAsync("prompt/one", "q1", { qos: 1 });
    await pub.publishAsync("prompt/two", "q2", { qos: 2 });
    await holder.next("publish");
    await holder.next("publish");
    holder.socket.destroy();
    const { client: back, inbox } = await connectCollecting(gw.port("mqtt"), {
      ...v5session("prompt", 600),
      resubscribe: false,
    });
    const again = await inbox.count(2, 1_000);
    expect(again.map((m) => [m.payload.toString(), m.packet.dup])).toEqual([
      ["q1", true],
      ["q2", true],
    ]);
    await Promise.all([
      pub.endAsync(),
      back.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } }),
    ]);
  });

  it("a resumed session gets its messages at once while a # subscriber (interest in every inbox) is connected", async () => {
    const everything = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await everything.subscribeAsync("#", { qos: 0 });
    const away = await connectMqtt(gw.port("mqtt"), v5session("beside-hash", 600));
    await away.subscribeAsync("plant/hash/+", { qos: 1 });
    await away.endAsync();
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    for (let i = 0; i < 3; i++) await pub.publishAsync(`plant/hash/${i}`, `h${i}`, { qos: 1 });
    const { client: back, inbox } = await connectCollecting(gw.port("mqtt"), {
      ...v5session("beside-hash", 600),
      resubscribe: false,
    });
    // Well within ack_wait (30 s): nothing went to the previous connection's pull requests.
    const seen = await inbox.count(3, 5_000);
    expect(seen.map((s) => s.payload.toString())).toEqual(["h0", "h1", "h2"]);
    await Promise.all([
      pub.endAsync(),
      everything.endAsync(),
      back.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } }),
    ]);
  });

  it("[MQTT-4.4.0-1] a QoS 2 delivery the client PUBRECed is finished with PUBREL on the next connection, not sent again", async () => {
    const c = await RawMqtt.connected(gw.port("mqtt"), 5, {
      clientId: "twophase",
      clean: false,
      properties: { sessionExpiryInterval: 600 },
    });
    c.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "plant/q2/+", qos: 2 }] } as mqttPacket.Packet);
    await c.next("suback");
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await pub.publishAsync("plant/q2/a", "once", { qos: 2 });
    const first = (await c.next("publish")) as mqttPacket.IPublishPacket;
    c.send({ cmd: "pubrec", messageId: first.messageId } as mqttPacket.Packet);
    await c.next("pubrel");
    c.socket.destroy();
    const again = await RawMqtt.connected(gw.port("mqtt"), 5, {
      clientId: "twophase",
      clean: false,
      properties: { sessionExpiryInterval: 600 },
    });
    const rel = (await again.next("pubrel")) as mqttPacket.IPubrelPacket;
    expect(rel.messageId).toBe(first.messageId);
    again.send({ cmd: "pubcomp", messageId: rel.messageId } as mqttPacket.Packet);
    // Nothing of it is published again on this connection.
    await pub.publishAsync("plant/q2/b", "next", { qos: 2 });
    const next = (await again.next("publish")) as mqttPacket.IPublishPacket;
    expect(next.payload.toString()).toBe("next");
    expect(again.packets.filter((p) => p.cmd === "publish")).toHaveLength(0);
    again.send({ cmd: "disconnect", reasonCode: 0, properties: { sessionExpiryInterval: 0 } } as mqttPacket.Packet);
    await pub.endAsync();
  });

  it("a persistent session's record leaves the bucket when it expires, without the client coming back", async () => {
    for (let i = 0; i < 30; i++) {
      const c = await connectMqtt(gw.port("mqtt"), v5session(`brief-${i}`, 1));
      await c.endAsync();
    }
    const mine = (keys: string[]) => keys.filter((k) => Buffer.from(k, "base64url").toString().startsWith("brief-"));
    expect(mine(await keys()).length).toBeGreaterThan(0);
    await eventually(
      async () => (mine(await keys()).length === 0 ? true : undefined),
      15_000,
      "expired sessions gone from the bucket",
    );
  });

  it.each([
    [5, "is told 0x8E (session taken over)"],
    [4, "is closed"],
  ] as const)(
    "MQTT %i: a connection whose session record someone else wrote since loses the session at its next write: it %s",
    async (version) => {
      const clientId = `overwritten-${version}`;
      const c = await RawMqtt.connected(gw.port("mqtt"), version, {
        clientId,
        clean: false,
        ...(version === 5 ? { properties: { sessionExpiryInterval: 600 } } : {}),
      });
      c.send({
        cmd: "subscribe",
        messageId: 1,
        subscriptions: [{ topic: "plant/over/a", qos: 1 }],
      } as mqttPacket.Packet);
      await c.next("suback");
      // A writer this gateway never heard of (another gateway whose claim was lost): a newer revision.
      const kv = await new Kvm(nc).open("MQGW_SESSIONS");
      const entry = await eventually(
        async () => (await kv.get(sessionKey(clientId))) ?? undefined,
        5_000,
        "the record",
      );
      const theirs = await kv.put(sessionKey(clientId), entry.value);
      // The SUBSCRIBE changes the record: its write, conditional on the revision this connection saw, is refused.
      c.send({
        cmd: "subscribe",
        messageId: 2,
        subscriptions: [{ topic: "plant/over/b", qos: 1 }],
      } as mqttPacket.Packet);
      if (version === 5) expect(((await c.next("disconnect")) as mqttPacket.IDisconnectPacket).reasonCode).toBe(0x8e);
      await eventually(() => (c.closed ? true : undefined), 5_000, "the connection closed");
      // The other writer's record stands: the connection that lost it wrote nothing over it.
      expect((await kv.get(sessionKey(clientId)))?.revision).toBe(theirs);
    },
  );
});

describe("MQTT sessions across gateways sharing the sessions bucket (a binding on plant.>)", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let gw: GatewayHandle;
  let other: GatewayHandle;
  const config = { bindings: [{ stream: "PLANT" }] };

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    await (await jetstreamManager(nc)).streams.add({ name: "PLANT", subjects: ["plant.>"] });
    gw = await startGateway({ nats: nats.url, config });
    other = await startGateway({ nats: nats.url, config });
  });
  afterAll(async () => {
    await nc?.close();
    await other?.stop();
    await gw?.stop();
    await nats?.stop();
  });

  it("one client id is one live connection whatever its session expiry: the older is taken over (0x8E)", async () => {
    const first = await RawMqtt.connected(gw.port("mqtt"), 5, { clientId: "twin", clean: true });
    const second = await connectMqtt(other.port("mqtt"), { protocolVersion: 5, clientId: "twin", clean: true });
    expect(((await first.next("disconnect")) as mqttPacket.IDisconnectPacket).reasonCode).toBe(0x8e);
    await second.endAsync();
    // And 3.1.1, both clean: closed.
    const old = await RawMqtt.connected(gw.port("mqtt"), 4, { clientId: "twin4", clean: true });
    const young = await connectMqtt(other.port("mqtt"), { protocolVersion: 4, clientId: "twin4", clean: true });
    await eventually(() => (old.closed ? true : undefined), 5_000, "the older 3.1.1 connection closed");
    await young.endAsync();
  });

  it("a burst of 40 connects on one gateway closes every older connection of those ids on the other; the claims share messages", async () => {
    const claims = nc.subscribe(`$MQG.claim.${other.id}`);
    const heard: Array<{ client_id?: string; claims?: Array<{ client_id: string }> }> = [];
    void (async () => {
      for await (const m of claims) heard.push(m.json());
    })();
    const ids = [...Array(40).keys()].map((i) => `burst-${i}`);
    const older = [];
    for (const clientId of ids) older.push(await RawMqtt.connected(gw.port("mqtt"), 5, { clientId, clean: true }));
    // As a fleet reconnects after a move: all at once, 3.1.1 and 5.
    const younger = await Promise.all(
      ids.map((clientId, i) =>
        connectMqtt(other.port("mqtt"), { protocolVersion: i % 2 ? 4 : 5, clientId, clean: true }),
      ),
    );
    for (const c of older) expect(((await c.next("disconnect")) as mqttPacket.IDisconnectPacket).reasonCode).toBe(0x8e);
    const claimed = () => heard.flatMap((m) => m.claims?.map((c) => c.client_id) ?? (m.client_id ? [m.client_id] : []));
    await eventually(() => (claimed().length >= ids.length ? true : undefined), 5_000, "every claim heard");
    expect(claimed().sort()).toEqual([...ids].sort());
    expect(heard.length).toBeLessThan(ids.length);
    claims.unsubscribe();
    await Promise.all(younger.map((c) => c.endAsync()));
  });

  it("mosquitto_sub (3.1.1 and 5), six started at once on the other gateway, takes over each older connection of its id", async () => {
    const ids = [...Array(6).keys()].map((i) => `mosq-twin-${i}`);
    const older = [];
    for (const clientId of ids) older.push(await RawMqtt.connected(gw.port("mqtt"), 5, { clientId, clean: true }));
    const subs = ids.map((clientId, i) =>
      spawn("mosquitto_sub", [
        "-h",
        "127.0.0.1",
        "-p",
        String(other.port("mqtt")),
        "-V",
        i % 2 ? "311" : "5",
        "-i",
        clientId,
        "-t",
        `mosq/twin/${i}`,
      ]),
    );
    try {
      for (const c of older)
        expect(((await c.next("disconnect", 10_000)) as mqttPacket.IDisconnectPacket).reasonCode).toBe(0x8e);
      expect(subs.every((p) => p.exitCode === null)).toBe(true);
    } finally {
      for (const p of subs) p.kill();
    }
  });

  it("a claim in the one-claim shape, as a gateway of an earlier version sends it, still takes over", async () => {
    // The account as the gateways name it: what one of them says in its own claim.
    const probe = nc.subscribe(`$MQG.claim.${other.id}`, { max: 1 });
    const announced = (async () => {
      for await (const m of probe) return (m.json() as { account: string }).account;
    })();
    const probing = await connectMqtt(other.port("mqtt"), { protocolVersion: 5, clientId: "probe", clean: true });
    const account = await announced;
    await probing.endAsync();
    const held = await RawMqtt.connected(gw.port("mqtt"), 5, { clientId: "from-old-gateway", clean: true });
    nc.publish(
      "$MQG.claim.an-older-gateway",
      JSON.stringify({ account, client_id: "from-old-gateway", at: Date.now(), clean_start: true }),
    );
    expect(((await held.next("disconnect")) as mqttPacket.IDisconnectPacket).reasonCode).toBe(0x8e);
  });

  it("a connection's cleanup never deletes what a newer connection of the id uses: 10 of 10 after a move", async () => {
    // Session Expiry 0 on gateway 1, then a persistent session of the same id on gateway 2.
    const brief = await RawMqtt.connected(gw.port("mqtt"), 5, { clientId: "shared-id", clean: true });
    const keeper = await connectMqtt(other.port("mqtt"), v5session("shared-id", 600));
    await eventually(() => (brief.closed ? true : undefined), 5_000, "gateway 1's connection taken over");
    await keeper.subscribeAsync("plant/shared/+", { qos: 1 });
    await keeper.endAsync();
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    for (let i = 0; i < 10; i++) await pub.publishAsync(`plant/shared/${i}`, `s${i}`, { qos: 1 });
    const { client: back, inbox } = await connectCollecting(other.port("mqtt"), {
      ...v5session("shared-id", 600),
      resubscribe: false,
    });
    expect(back.connack.sessionPresent).toBe(true);
    const seen = await inbox.count(10);
    expect(seen.map((s) => s.payload.toString())).toEqual([...Array(10).keys()].map((i) => `s${i}`));
    await Promise.all([
      pub.endAsync(),
      back.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } }),
    ]);
  });
  it("a gateway killed with sessions marked connected: another settles them, and they expire from then on", async () => {
    // A bucket of their own: the other gateways' sweeper holds the shared bucket's lock for its 5 min.
    const bucket = { listen: "127.0.0.1:0", sessions_bucket: "MQGW_SWEPT" };
    const survivor = await startGateway({
      nats: nats.url,
      config: { ...config, mqtt: { ...bucket, session_sweep_interval: "1s" } },
    });
    const victim = await startGateway({ nats: nats.url, config: { ...config, mqtt: bucket } });
    try {
      // The survivor serves the account too (its sweeper looks through buckets it has used).
      const warm = await connectMqtt(survivor.port("mqtt"), { protocolVersion: 5 });
      await warm.endAsync();
      const held = [];
      for (let i = 0; i < 5; i++) held.push(await connectMqtt(victim.port("mqtt"), v5session(`orphan-${i}`, 2)));
      expect(await sessionKeys(nc, "MQGW_SWEPT")).toHaveLength(5);
      victim.process.kill("SIGKILL");
      for (const c of held) c.end(true);
      await eventually(
        async () => ((await sessionKeys(nc, "MQGW_SWEPT")).length === 0 ? true : undefined),
        20_000,
        "orphaned sessions settled and expired",
      );
    } finally {
      await victim.stop();
      await survivor.stop();
    }
  });
});
