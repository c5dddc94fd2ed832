// Issue 12 item 2: with no binding, on the two-command embedded default, QoS 1/2 messages
// published while a persistent session is away are kept in the MQTT store and delivered
// when it comes back; QoS 0 is never stored; NATS subscribers see every message once.
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqttPacket from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectCollecting, connectMqtt } from "../helpers/mqttClient.js";
import { natsServerBinary } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { freePort } from "../helpers/ports.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const STORE = "MQGW_MSGS";

type Inbox = ReturnType<typeof collect>;

/**
 * The first `n` messages that `mine` accepts. A `+/+` subscriber on the embedded default
 * also hears the gateway's own `_INBOX.x` replies until the delivery guard of the
 * authorization issue lands; those are not what this file tests.
 */
async function until(
  inbox: Inbox,
  n: number,
  mine: (s: Inbox["seen"][number]) => boolean,
  timeoutMs = 10_000,
): Promise<Inbox["seen"]> {
  const picked = () => inbox.seen.filter(mine);
  await eventually(() => (picked().length >= n ? true : undefined), timeoutMs, `${n} messages`);
  return picked();
}

describe("the MQTT store on the embedded default (no config, no binding)", () => {
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    const natsPort = await freePort();
    gw = await startGateway({
      config: { nats: { embedded_listen: `127.0.0.1:${natsPort}` } },
      env: { NATS_SERVER_BIN: natsServerBinary() },
    });
    nc = await connect({ servers: `nats://127.0.0.1:${natsPort}` });
    jsm = await jetstreamManager(nc);
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
  });

  /**
   * Messages on the NATS side, by subject and payload, to count copies. Deliveries to the
   * gateway's own `_INBOX.x` (two tokens, so `*.*` hears them) are its traffic, which
   * moves under `$MQG.inbox.` with the authorization issue's decision 1.
   */
  function natsSeen(subject: string): string[] {
    const seen: string[] = [];
    nc.subscribe(subject, {
      callback: (_e, m) => {
        if (m.subject.startsWith("$MQG.") || m.subject.startsWith("_INBOX.") || m.reply?.startsWith("$JS.ACK.")) return;
        seen.push(`${m.subject}=${m.string()}`);
      },
    });
    return seen;
  }

  const stored = async (): Promise<number> => (await jsm.streams.info(STORE)).state.messages;

  it("a 3.1.1 clean-session-0 client on +/+ at QoS 2 gets, after reconnecting, the QoS 1 and 2 messages sent while it was away", async () => {
    const session = { protocolVersion: 4 as const, clientId: "away-311", clean: false };
    const sub = await connectMqtt(gw.port("mqtt"), session);
    await sub.subscribeAsync("+/+", { qos: 2 });
    await sub.endAsync();
    const nats = natsSeen("*.*");
    await nc.flush();

    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 4 });
    await pub.publishAsync("TopicA/B", "a-qos1", { qos: 1 });
    await pub.publishAsync("Topic/C", "c-qos2", { qos: 2 });
    await pub.publishAsync("TopicA/B", "a-qos0", { qos: 0 });
    await pub.publishAsync("Topic/C", "c-qos1", { qos: 1 });
    await pub.publishAsync("TopicA/B", "a-qos2", { qos: 2 });
    // Everything acknowledged is kept: four QoS 1/2 messages, not the QoS 0 one.
    expect(await stored()).toBe(4);

    const { client: back, inbox } = await connectCollecting(gw.port("mqtt"), { ...session, resubscribe: false });
    expect(back.connack.sessionPresent).toBe(true);
    const mine = (n: number) => until(inbox, n, (s) => s.topic === "TopicA/B" || s.topic === "Topic/C");
    const seen = await mine(4);
    // At the QoS published (the subscription allows 2). Per-topic order across a reconnect
    // is the session lifecycle's part of the issue (item 6), so not asserted here.
    expect(seen.map((s) => `${s.topic}=${s.payload}@${s.packet.qos}`).sort()).toEqual([
      "Topic/C=c-qos1@1",
      "Topic/C=c-qos2@2",
      "TopicA/B=a-qos1@1",
      "TopicA/B=a-qos2@2",
    ]);
    // Acknowledged by the client: interest retention lets them go.
    await eventually(async () => ((await stored()) === 0 ? true : undefined), 10_000, "the store emptied");
    // NATS saw each of the five once, QoS 0 included.
    await eventually(() => (nats.length >= 5 ? true : undefined), 5_000, "NATS copies");
    expect(nats.sort()).toEqual([
      "Topic.C=c-qos1",
      "Topic.C=c-qos2",
      "TopicA.B=a-qos0",
      "TopicA.B=a-qos1",
      "TopicA.B=a-qos2",
    ]);
    // Nothing more comes to the MQTT subscriber (no second copy from core NATS).
    await pub.publishAsync("TopicA/B", "marker", { qos: 1 });
    const after = await mine(5);
    expect(after[4]!.payload.toString()).toBe("marker");
    await Promise.all([pub.endAsync(), back.endAsync()]);
    // A clean start ends the session, and its consumer with it: +/+ keeps nothing more for the next tests.
    await (await connectMqtt(gw.port("mqtt"), { protocolVersion: 4, clientId: "away-311", clean: true })).endAsync();
  });

  it("an MQTT 5 client with a Session Expiry gets what was published while it was away; the remaining expiry is sent", async () => {
    const session = {
      protocolVersion: 5 as const,
      clientId: "away-v5",
      clean: false,
      properties: { sessionExpiryInterval: 300 },
    };
    const sub = await connectMqtt(gw.port("mqtt"), session);
    await sub.subscribeAsync("sensor/+", { qos: 1 });
    await sub.endAsync();

    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    for (let i = 0; i < 5; i++)
      await pub.publishAsync("sensor/t1", `t${i}`, { qos: 1, properties: { messageExpiryInterval: 600 } });
    await pub.publishAsync("sensor/t1", "qos0", { qos: 0 });

    const { client: back, inbox } = await connectCollecting(gw.port("mqtt"), { ...session, resubscribe: false });
    expect(back.connack.sessionPresent).toBe(true);
    const seen = await inbox.count(5);
    expect(seen.map((s) => s.payload.toString()).sort()).toEqual(["t0", "t1", "t2", "t3", "t4"]);
    for (const s of seen) {
      const left = s.packet.properties?.messageExpiryInterval ?? 0;
      expect(left).toBeGreaterThan(500);
      expect(left).toBeLessThanOrEqual(600);
    }
    await Promise.all([pub.endAsync(), back.endAsync()]);
  });

  it("a QoS 1 will is kept for a session that is away too", async () => {
    const session = {
      protocolVersion: 5 as const,
      clientId: "will-watcher",
      clean: false,
      properties: { sessionExpiryInterval: 300 },
    };
    const watcher = await connectMqtt(gw.port("mqtt"), session);
    await watcher.subscribeAsync("wills/+", { qos: 1 });
    await watcher.endAsync();
    const dying = await RawMqtt.connected(gw.port("mqtt"), 4, {
      clientId: "dying",
      will: { topic: "wills/dying", payload: Buffer.from("gone"), qos: 1, retain: false },
    });
    dying.socket.destroy(); // a network drop: the will goes out
    await eventually(async () => ((await stored()) >= 1 ? true : undefined), 10_000, "the will kept");
    const { client: back, inbox } = await connectCollecting(gw.port("mqtt"), { ...session, resubscribe: false });
    const [will] = await inbox.count(1);
    expect([will!.topic, will!.payload.toString(), will!.packet.qos]).toEqual(["wills/dying", "gone", 1]);
    await back.endAsync();
  });

  it("QoS 0 is never stored, and nothing is kept for a topic no persistent session subscribes", async () => {
    const sub = await connectMqtt(gw.port("mqtt"), {
      protocolVersion: 5,
      clientId: "online-q1",
      clean: false,
      properties: { sessionExpiryInterval: 300 },
    });
    await sub.subscribeAsync("plant/+/temp", { qos: 1 });
    const inbox = collect(sub);
    const before = (await jsm.streams.info(STORE)).state.last_seq;
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    for (let i = 0; i < 20; i++) await pub.publishAsync("plant/l1/temp", `q0-${i}`, { qos: 0 });
    await pub.publishAsync("no/session/reads", "nobody", { qos: 1 });
    await pub.publishAsync("plant/l1/temp", "q1", { qos: 1 });
    const seen = await inbox.count(21);
    expect(seen.filter((s) => s.packet.qos === 0)).toHaveLength(20);
    // The QoS 1 messages went through the store; the QoS 0 ones never did.
    const info = await jsm.streams.info(STORE);
    expect(info.state.last_seq - before).toBe(2);
    // One with no consumer to read it was not kept; the other, read and acknowledged, went too.
    await eventually(async () => ((await stored()) === 0 ? true : undefined), 10_000, "the store emptied");
    await Promise.all([pub.endAsync(), sub.endAsync()]);
  });

  it("a clean session's QoS 1 subscription is served live from core NATS, once", async () => {
    const live = await RawMqtt.connected(gw.port("mqtt"), 5, { clientId: "clean-q1" });
    live.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "clean/q", qos: 1 }] } as mqttPacket.Packet);
    await live.next("suback");
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 4 });
    await pub.publishAsync("clean/q", "one", { qos: 1 });
    const p = (await live.next("publish")) as mqttPacket.IPublishPacket;
    expect([p.payload.toString(), p.qos]).toEqual(["one", 1]);
    // No Response Topic: the core copy of a stored message carries no NATS reply.
    expect(p.properties?.responseTopic).toBeUndefined();
    live.send({ cmd: "puback", messageId: p.messageId } as mqttPacket.Packet);
    await pub.publishAsync("clean/q", "two", { qos: 1 });
    const q = (await live.next("publish")) as mqttPacket.IPublishPacket;
    expect(q.payload.toString()).toBe("two");
    live.end();
    await pub.endAsync();
  });

  it("the store is the one stream on $MQG.msgs.> with interest retention", async () => {
    const info = await jsm.streams.info(STORE);
    expect(info.config.subjects).toEqual(["$MQG.msgs.>"]);
    expect(info.config.retention).toBe("interest");
    expect(info.config.num_replicas).toBe(1);
  });
});
