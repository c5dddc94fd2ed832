// The MQTT store beside an operator's binding (docs/decisions/mqtt-store.md): a bound
// subject keeps today's path (the operator's stream), an unbound one goes through the
// store, a subscription that mixes both reads the store for what it holds and gets the
// bound subjects live; NATS and AMQP subscribers of the plain subjects see each message once.
import { readFileSync, writeFileSync } from "node:fs";
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { AmqpClient, bodyText, collect as collectAmqp } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectCollecting, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";

const STORE = "MQGW_MSGS";
const session = (clientId: string) => ({
  protocolVersion: 5 as const,
  clientId,
  clean: false,
  properties: { sessionExpiryInterval: 600 },
});

describe("the MQTT store beside a binding", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "DEV", subjects: ["mix.dev.>"] });
    gw = await startGateway({ nats: nats.url, config: { bindings: [{ stream: "DEV" }] } });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  const lastSeq = async (): Promise<number> =>
    (await jsm.streams.info(STORE).catch(() => undefined))?.state.last_seq ?? 0;

  it("a bound subject's QoS 1 publish goes to the operator's stream only, and its subscriber reads that stream", async () => {
    const sub = await connectMqtt(gw.port("mqtt"), session("bound-only"));
    await sub.subscribeAsync("mix/dev/b/+", { qos: 1 });
    await sub.endAsync();
    const before = await lastSeq();
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await pub.publishAsync("mix/dev/b/1", "bound", { qos: 1 });
    expect(await lastSeq()).toBe(before);
    const { client: back, inbox } = await connectCollecting(gw.port("mqtt"), {
      ...session("bound-only"),
      resubscribe: false,
    });
    const [m] = await inbox.count(1);
    expect(m!.payload.toString()).toBe("bound");
    await Promise.all([pub.endAsync(), back.endAsync()]);
  });

  it("a subscription mixing bound and unbound subjects: away, the unbound messages are kept; online, each message comes once", async () => {
    const sub = await connectMqtt(gw.port("mqtt"), session("mixed"));
    await sub.subscribeAsync("mix/#", { qos: 1 });
    await sub.endAsync();
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await pub.publishAsync("mix/free/1", "kept", { qos: 1 });
    await pub.publishAsync("mix/dev/m/1", "bound, live only for mix/#", { qos: 1 });

    const { client: back, inbox } = await connectCollecting(gw.port("mqtt"), {
      ...session("mixed"),
      resubscribe: false,
    });
    const [kept] = await inbox.count(1);
    expect([kept!.topic, kept!.payload.toString()]).toEqual(["mix/free/1", "kept"]);
    // Online: the unbound message from the store, the bound one live from core NATS, once each.
    const natsSeen: string[] = [];
    nc.subscribe("mix.>", { callback: (_e, m) => natsSeen.push(m.subject) });
    const amqp = await AmqpClient.open(gw.port("amqp"), { container_id: "mix-rx" });
    const amqpSeen = collectAmqp(await amqp.receiver({ source: { address: "mix.>" }, snd_settle_mode: 1 }));
    await nc.flush();
    await pub.publishAsync("mix/free/2", "free online", { qos: 1 });
    await pub.publishAsync("mix/dev/m/2", "bound online", { qos: 1 });
    await pub.publishAsync("mix/free/3", "last", { qos: 1 });
    const seen = await inbox.count(4);
    expect(
      seen
        .slice(1)
        .map((s) => s.payload.toString())
        .sort(),
    ).toEqual(["bound online", "free online", "last"]);
    const fromAmqp = await amqpSeen.take(3);
    expect(fromAmqp.map((r) => bodyText(r.message)).sort()).toEqual(["bound online", "free online", "last"]);
    await eventually(() => (natsSeen.length >= 3 ? true : undefined), 5_000, "NATS copies");
    expect(natsSeen.sort()).toEqual(["mix.dev.m.2", "mix.free.2", "mix.free.3"]);
    // Nothing twice: one more message is the next thing each sees.
    await pub.publishAsync("mix/free/4", "end", { qos: 1 });
    expect((await inbox.count(5))[4]!.payload.toString()).toBe("end");
    expect(bodyText((await amqpSeen.next()).message)).toBe("end");
    await Promise.all([pub.endAsync(), back.endAsync(), amqp.close()]);
  });

  it('with mqtt.messages_stream "" the store is off: QoS 1 to an unbound subject is acknowledged and delivered live only', async () => {
    const off = await startGateway({
      nats: nats.url,
      config: { mqtt: { listen: "127.0.0.1:0", messages_stream: "" } },
    });
    try {
      const before = await lastSeq();
      const sub = await connectMqtt(off.port("mqtt"), session("store-off"));
      await sub.subscribeAsync("off/+", { qos: 1 });
      const inbox = collect(sub);
      const pub = await connectMqtt(off.port("mqtt"), { protocolVersion: 5 });
      await pub.publishAsync("off/1", "live", { qos: 1 });
      const [m] = await inbox.count(1);
      expect([m!.payload.toString(), m!.packet.qos]).toEqual(["live", 1]);
      await sub.endAsync();
      await pub.publishAsync("off/1", "while away", { qos: 1 });
      const { client: back, inbox: backInbox } = await connectCollecting(off.port("mqtt"), {
        ...session("store-off"),
        resubscribe: false,
      });
      await pub.publishAsync("off/1", "back", { qos: 1 });
      const [again] = await backInbox.count(1);
      expect(again!.payload.toString()).toBe("back");
      expect(await lastSeq()).toBe(before);
      await Promise.all([pub.endAsync(), back.endAsync()]);
    } finally {
      await off.stop();
    }
  });

  it("a reload (SIGHUP) applies new store limits to the existing stream", async () => {
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await pub.publishAsync("limits/1", "before", { qos: 1 });
    expect((await jsm.streams.info(STORE)).config.max_age).toBe(0);
    const args = gw.process.spawnargs;
    const file = args[args.indexOf("--config") + 1]!;
    const config = parse(readFileSync(file, "utf8"));
    config.mqtt = { ...config.mqtt, messages_max_age: "1h", messages_max_bytes: "64MiB" };
    writeFileSync(file, stringify(config));
    gw.process.kill("SIGHUP");
    await gw.waitForLog((l) => l.msg === "config reloaded");
    await pub.publishAsync("limits/1", "after", { qos: 1 });
    const info = await jsm.streams.info(STORE);
    expect([info.config.max_age, info.config.max_bytes]).toEqual([3_600_000_000_000, 64 * 1024 * 1024]);
    await pub.endAsync();
  });
});
