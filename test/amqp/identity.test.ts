// Issue 12 item 1 on the AMQP door: applications reuse message-ids, so an accepted
// transfer is stored whatever its message-id, unless the operator asks for duplicate
// detection (amqp.dedupe_message_id, as Azure Service Bus's); and unsettled sends to
// unbound subjects reach MQTT sessions that are away, through the MQTT store.
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { connectCollecting, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { AmqpClient, rhea, send } from "./rheaClient.js";

const session = (clientId: string) => ({
  protocolVersion: 5 as const,
  clientId,
  clean: false,
  properties: { sessionExpiryInterval: 600 },
});

describe("AMQP message identity and the MQTT store", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let deduping: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "DEV", subjects: ["dev.>"] });
    const config = { bindings: [{ stream: "DEV" }] };
    [gw, deduping] = await Promise.all([
      startGateway({ nats: nats.url, config }),
      startGateway({ nats: nats.url, config: { ...config, amqp: { listen: "127.0.0.1:0", dedupe_message_id: true } } }),
    ]);
  });
  afterAll(async () => {
    await nc?.close();
    await Promise.all([gw?.stop(), deduping?.stop()]);
    await nats?.stop();
  });

  /** Sends `bodies` on one link, each with the same message-id; every one must be accepted. */
  async function sendAll(port: number, container: string, address: string, bodies: readonly string[]): Promise<void> {
    const amqp = await AmqpClient.open(port, { container_id: container });
    const sender = await amqp.sender(address);
    for (const b of bodies)
      expect(await send(sender, { body: rhea.message.data_section(Buffer.from(b)), message_id: "reading" })).toEqual({
        state: "accepted",
      });
    await amqp.close();
  }

  const BODIES = ["ON", "OFF", "ON", "ON", "OFF"];

  it("by default a sender that reuses one message-id loses nothing: bound subject, unbound subject, an MQTT session away", async () => {
    const sub = await connectMqtt(gw.port("mqtt"), session("amqp-away"));
    await sub.subscribeAsync(["dev/amqp/+", "free/amqp/+"], { qos: 1 });
    await sub.endAsync();

    await sendAll(gw.port("amqp"), "thermostat", "dev.amqp.t", BODIES);
    await sendAll(gw.port("amqp"), "thermostat", "free.amqp.t", BODIES);
    expect((await jsm.streams.info("DEV", { subjects_filter: "dev.amqp.t" })).state.subjects?.["dev.amqp.t"]).toBe(
      BODIES.length,
    );

    const { client: back, inbox } = await connectCollecting(gw.port("mqtt"), {
      ...session("amqp-away"),
      resubscribe: false,
    });
    expect(back.connack.sessionPresent).toBe(true);
    const seen = await inbox.count(BODIES.length * 2, 10_000);
    const got = (topic: string) =>
      seen
        .filter((s) => s.topic === topic)
        .map((s) => s.payload.toString())
        .sort();
    expect(got("dev/amqp/t")).toEqual([...BODIES].sort());
    // Unsettled sends to unbound subjects were kept in the MQTT store for the session.
    expect(got("free/amqp/t")).toEqual([...BODIES].sort());
    expect(seen.every((s) => s.packet.qos === 1)).toBe(true);
    await back.endAsync();
  });

  it("with amqp.dedupe_message_id a message-id the same sender reuses is stored once, bound or in the MQTT store", async () => {
    const sub = await connectMqtt(deduping.port("mqtt"), session("amqp-dedupe"));
    await sub.subscribeAsync(["dev/dedupe/+", "free/dedupe/+"], { qos: 1 });
    await sub.endAsync();

    await sendAll(deduping.port("amqp"), "resender", "dev.dedupe.t", ["first", "again", "again"]);
    await sendAll(deduping.port("amqp"), "resender", "free.dedupe.t", ["first", "again", "again"]);
    const stored = await jsm.streams.getMessage("DEV", { last_by_subj: "dev.dedupe.t" });
    expect((await jsm.streams.info("DEV", { subjects_filter: "dev.dedupe.t" })).state.subjects?.["dev.dedupe.t"]).toBe(
      1,
    );
    expect(stored?.header.get("Nats-Msg-Id")).toBe("resender/reading");
    expect(stored?.string()).toBe("first");

    const { client: back, inbox } = await connectCollecting(deduping.port("mqtt"), {
      ...session("amqp-dedupe"),
      resubscribe: false,
    });
    const seen = await inbox.count(2, 10_000);
    expect(seen.map((s) => `${s.topic}=${s.payload}`).sort()).toEqual(["dev/dedupe/t=first", "free/dedupe/t=first"]);
    // A later message shows nothing else was on its way.
    await sendAll(deduping.port("amqp"), "other-sender", "free.dedupe.t", ["marker"]);
    const all = await inbox.count(3, 10_000);
    expect(all[2]!.payload.toString()).toBe("marker");
    await back.endAsync();
  });
});
