// Issue 12 item 1: a publish's identity is the publish, not its content. Publishers that
// reuse packet id 1 and repeat payloads (thermostats: ON OFF ON; mosquitto_pub, one
// process per message) lost PUBACKed messages as "duplicates". Every acknowledged message
// must reach a persistent QoS 1 subscriber, online or coming back, on a subject a
// binding stores and on one no binding touches (the MQTT store).
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { IMessageIdProvider } from "mqtt";
import mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectCollecting, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { mosquittoPub, pahoPub } from "../helpers/publishers.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const SEQUENCE = ["a1", "a1", "b", "a1", "b", "b", "c", "c"];
/** 44 readings of a thermostat that says the same thing often. */
const THERMOSTAT = Array.from({ length: 44 }, (_, i) => ["ON", "OFF", "ON", "ON", "OFF", "21.5", "21.5"][i % 7]!);

/** mqtt.js with every publish on packet id 1 (allowed once the previous one is acknowledged). */
const alwaysOne = (): IMessageIdProvider => ({
  allocate: () => 1,
  getLastAllocated: () => 1,
  register: () => true,
  deallocate: () => {},
  clear: () => {},
});

type Publisher = (
  port: number,
  version: 4 | 5,
  clientId: string,
  topic: string,
  payloads: readonly string[],
) => Promise<void>;

/** mqtt.js, one connection per run of payloads, every message packet id 1, each PUBACK awaited. */
const mqttJsPub: Publisher = async (port, version, clientId, topic, payloads) => {
  const c = await connectMqtt(port, {
    protocolVersion: version,
    clientId,
    clean: true,
    messageIdProvider: alwaysOne(),
  });
  for (const p of payloads) await c.publishAsync(topic, p, { qos: 1 });
  await c.endAsync();
};

const PUBLISHERS: Array<[string, Publisher]> = [
  ["mqtt.js", mqttJsPub],
  ["mosquitto_pub", mosquittoPub],
  ["paho", pahoPub],
];

describe("publish identity: repeated payloads on packet id 1 are all kept", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "DEV", subjects: ["dev.>"] });
    gw = await startGateway({
      nats: nats.url,
      config: { bindings: [{ stream: "DEV" }], log: { level: "info", format: "json" } },
    });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  for (const [name, publish] of PUBLISHERS) {
    for (const version of [4, 5] as const) {
      it(`${name}, MQTT ${version === 5 ? "5" : "3.1.1"}: a bound and an unbound subject, to a subscriber online and one coming back`, async () => {
        const tag = `${name.replace(/\W/g, "")}${version}`;
        const port = gw.port("mqtt");
        const filters = [`dev/${tag}/+`, `free/${tag}/+`];
        const online = await connectMqtt(port, {
          protocolVersion: 5,
          clientId: `on-${tag}`,
          clean: false,
          properties: { sessionExpiryInterval: 600 },
        });
        await online.subscribeAsync(filters, { qos: 1 });
        const live = collect(online);
        const away = await connectMqtt(port, { protocolVersion: 4, clientId: `away-${tag}`, clean: false });
        await away.subscribeAsync(filters, { qos: 1 });
        await away.endAsync();

        const expected: string[] = [];
        for (const root of ["dev", "free"]) {
          await publish(port, version, `pub-${tag}`, `${root}/${tag}/seq`, SEQUENCE);
          await publish(port, version, `pub-${tag}`, `${root}/${tag}/thermo`, THERMOSTAT);
          expected.push(
            ...SEQUENCE.map((p) => `${root}/${tag}/seq=${p}`),
            ...THERMOSTAT.map((p) => `${root}/${tag}/thermo=${p}`),
          );
        }
        const total = expected.length; // (8 + 44) x 2
        // Every one stored where it belongs: the bound stream, and (while `away` is away) the MQTT store.
        const bound = await jsm.streams.info("DEV", { subjects_filter: `dev.${tag}.>` });
        expect(bound.state.subjects).toEqual({
          [`dev.${tag}.seq`]: SEQUENCE.length,
          [`dev.${tag}.thermo`]: THERMOSTAT.length,
        });

        const seenLive = await live.count(total, 20_000);
        const asText = (s: { topic: string; payload: Buffer }) => `${s.topic}=${s.payload}`;
        // Online, in publish order per topic.
        for (const topic of ["seq", "thermo"].flatMap((t) => [`dev/${tag}/${t}`, `free/${tag}/${t}`])) {
          expect(seenLive.filter((s) => s.topic === topic).map(asText)).toEqual(
            expected.filter((e) => e.startsWith(`${topic}=`)),
          );
        }
        expect(seenLive.every((s) => s.packet.qos === 1)).toBe(true);

        const { client: back, inbox } = await connectCollecting(port, {
          protocolVersion: 4,
          clientId: `away-${tag}`,
          clean: false,
          resubscribe: false,
        });
        expect(back.connack.sessionPresent).toBe(true);
        const seenBack = await inbox.count(total, 20_000);
        // Every acknowledged message; order across a reconnect is the session lifecycle's part (item 6).
        expect(seenBack.map(asText).sort()).toEqual([...expected].sort());

        // Nothing more than once.
        await eventually(() => (live.seen.length === total ? true : undefined), 1_000, "no extra live copy").catch(
          () => undefined,
        );
        expect(live.seen).toHaveLength(total);
        await Promise.all([online.endAsync(), back.endAsync()]);
      }, 90_000);
    }
  }

  it("a resend (DUP) of a packet id still unacknowledged is stored once; a new message on the same packet id is stored again", async () => {
    const c = await RawMqtt.connected(gw.port("mqtt"), 5, { clientId: "resender" });
    const packet = (payload: string, dup: boolean) =>
      mqtt.generate(
        {
          cmd: "publish",
          topic: "dev/resend/x",
          payload: Buffer.from(payload),
          qos: 1,
          messageId: 1,
          retain: false,
          dup,
        },
        { protocolVersion: 5 },
      );
    const publish = (payload: string, dup: boolean) => c.sendBytes(packet(payload, dup));
    // In one write: a 3.1.1-style resend on a timer, before the PUBACK came, is answered once.
    c.sendBytes(Buffer.concat([packet("same", false), packet("same", true)]));
    await c.next("puback");
    publish("same", true); // and one that crossed the PUBACK
    await c.next("puback");
    publish("same", false); // a new message that happens to say the same
    await c.next("puback");
    const info = await jsm.streams.info("DEV", { subjects_filter: "dev.resend.x" });
    expect(info.state.subjects?.["dev.resend.x"]).toBe(2);
    c.end();
  });

  it("a gateway restart does not make a new message look like an old one", async () => {
    const other = await startGateway({ nats: nats.url, config: { bindings: [{ stream: "DEV" }] } });
    try {
      for (const g of [gw, other, gw]) await mqttJsPub(g.port("mqtt"), 5, "restart-pub", "dev/restart/x", ["ON", "ON"]);
      const info = await jsm.streams.info("DEV", { subjects_filter: "dev.restart.x" });
      expect(info.state.subjects?.["dev.restart.x"]).toBe(6);
    } finally {
      await other.stop();
    }
  });
});
