// The hot path of docs/performance.md: hand-read PUBLISH/PUBACK, socket reads handled
// together, plain PUB for QoS 0 without properties (No Local kept), corked writes, and
// stored publishes through one shared inbox. Same behaviour as before, checked end to end.
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type Msg, type NatsConnection } from "@nats-io/transport-node";
import mqtt, { type Packet } from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

function natsInbox(nc: NatsConnection, subject: string) {
  const got: Msg[] = [];
  nc.subscribe(subject, { callback: (_e, m) => got.push(m) });
  return {
    got,
    async count(n: number, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (got.length < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      if (got.length < n) throw new Error(`expected ${n} NATS messages, got ${got.length}`);
      return got;
    },
  };
}

describe("MQTT hot path", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "FAST", subjects: ["fast.stored.>"] });
    // Plain PUB for bare QoS 0 is opt-in (mqtt.client_id_header); the default follows the spec's table.
    gw = await startGateway({
      nats: nats.url,
      config: { bindings: [{ stream: "FAST" }], mqtt: { listen: "127.0.0.1:0", client_id_header: "when_needed" } },
    });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("a QoS 0 publish without properties is a plain PUB; with a No Local subscription it names its client, which does not get it back", async () => {
    const inbox = natsInbox(nc, "fast.nl.>");
    await nc.flush();
    const me = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, clientId: "fast-me" });
    const other = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, clientId: "fast-other" });
    const mine = collect(me);
    const theirs = collect(other);
    await other.subscribeAsync("fast/nl/#", { qos: 0 });

    await me.publishAsync("fast/nl/plain", "p", { qos: 0 });
    const [plain] = await inbox.count(1);
    expect(plain!.headers).toBeUndefined();

    await me.subscribeAsync("fast/nl/t", { qos: 0, nl: true });
    await me.subscribeAsync("fast/nl/marker", { qos: 0 });
    await me.publishAsync("fast/nl/t", "own", { qos: 0 });
    await me.publishAsync("fast/nl/marker", "after", { qos: 0 });
    const got = await inbox.count(3);
    expect(got[1]!.headers?.get("Mqgw-Mqtt-Client-Id")).toBe("fast-me");
    await theirs.count(3);
    const seen = await mine.count(1);
    expect(seen.map((s) => s.topic)).toEqual(["fast/nl/marker"]);

    await me.unsubscribeAsync("fast/nl/t");
    // The topic it last published with its id: the same topic now goes plain again.
    await me.publishAsync("fast/nl/marker", "p2", { qos: 0 });
    const after = await inbox.count(4);
    expect(after[3]!.headers).toBeUndefined();
    await Promise.all([me.endAsync(), other.endAsync()]);
  });

  it("pipelined publishes in one write keep their order, QoS 0 and stored QoS 1 alike, and every QoS 1 gets its PUBACK", async () => {
    const live = natsInbox(nc, "fast.order.*");
    await nc.flush();
    const c = await RawMqtt.connected(gw.port("mqtt"), 4, { clientId: "fast-order" });
    const n = 500;
    const bytes: Buffer[] = [];
    for (let i = 0; i < n; i++) {
      bytes.push(
        mqtt.generate(
          {
            cmd: "publish",
            topic: "fast/order/q0",
            payload: Buffer.from(String(i)),
            qos: 0,
            retain: false,
            dup: false,
          },
          { protocolVersion: 4 },
        ),
      );
      bytes.push(
        mqtt.generate(
          {
            cmd: "publish",
            topic: "fast/stored/q1",
            payload: Buffer.from(String(i)),
            qos: 1,
            messageId: i + 1,
            retain: false,
            dup: false,
          },
          { protocolVersion: 4 },
        ),
      );
    }
    c.sendBytes(Buffer.concat(bytes));
    const got = await live.count(n);
    expect(got.map((m) => m.string())).toEqual(Array.from({ length: n }, (_, i) => String(i)));
    const acked = new Set<number>();
    for (let i = 0; i < n; i++) acked.add(((await c.next("puback")) as mqtt.IPubackPacket).messageId!);
    expect(acked.size).toBe(n);
    const info = await jsm.streams.info("FAST");
    expect(info.state.messages).toBe(n);
    const first = await jsm.streams.getMessage("FAST", { seq: info.state.first_seq });
    const last = await jsm.streams.getMessage("FAST", { seq: info.state.last_seq });
    expect([first?.string(), last?.string()]).toEqual(["0", String(n - 1)]);
    // Each publish its own Nats-Msg-Id (docs/decisions/publish-identity.md).
    expect(first?.header.get("Nats-Msg-Id")).toBeTruthy();
    expect(first?.header.get("Nats-Msg-Id")).not.toBe(last?.header.get("Nats-Msg-Id"));
    c.end();
  });

  it("a QoS 1 stored subscriber gets and acknowledges many messages (PUBACKs read on the fast path)", async () => {
    const sub = await RawMqtt.connected(gw.port("mqtt"), 4, { clientId: "fast-q1-sub" });
    sub.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "fast/stored/sub", qos: 1 }] } as Packet);
    await sub.next("suback");
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 4 });
    const n = 300;
    await Promise.all(Array.from({ length: n }, (_, i) => pub.publishAsync("fast/stored/sub", String(i), { qos: 1 })));
    const ids: number[] = [];
    for (let i = 0; i < n; i++) {
      const p = (await sub.next("publish", 10_000)) as mqtt.IPublishPacket;
      expect(p.qos).toBe(1);
      ids.push(p.messageId!);
      sub.send({ cmd: "puback", messageId: p.messageId } as Packet);
    }
    expect(new Set(ids).size).toBe(n);
    // Everything acknowledged: nothing comes again.
    await expect(sub.next("publish", 1_500)).rejects.toThrow();
    await pub.endAsync();
    sub.end();
  });

  it("a DISCONNECT in the same write as the close still discards the will", async () => {
    const wills = natsInbox(nc, "fast.will");
    await nc.flush();
    const c = await RawMqtt.open(gw.port("mqtt"), 4);
    const connect = mqtt.generate(
      {
        cmd: "connect",
        protocolId: "MQTT",
        protocolVersion: 4,
        clientId: "fast-will",
        clean: true,
        keepalive: 60,
        will: { topic: "fast/will", payload: Buffer.from("gone"), qos: 0, retain: false },
      } as Packet,
      { protocolVersion: 4 },
    );
    c.sendBytes(connect);
    await c.next("connack");
    c.socket.end(Buffer.from([0xe0, 0x00]));
    await c.waitClosed();
    // The actor has ended (a will would have gone out before this line is logged).
    const closed = await gw.waitForLog((l) => l.msg === "MQTT connection closed" && l.client_id === "fast-will");
    expect(closed.reason).toBe("DISCONNECT");
    await nc.flush();
    expect(wills.got).toHaveLength(0);
  });
});
