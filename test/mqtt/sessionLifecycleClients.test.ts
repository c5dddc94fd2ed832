// The session lifecycle of the storage issue as third-party clients live it, on the
// embedded default: mqtt.js and Debian's paho-mqtt flapping one client id, a will whose
// session ends before its delay, a client that leaves its deliveries unacknowledged, and
// expired sessions whose consumers go without the client coming back.
import { join } from "node:path";
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startEmbeddedGateway } from "../helpers/gateway.js";
import { collect, connectCollecting, connectMqtt } from "../helpers/mqttClient.js";
import { eventually } from "../helpers/poll.js";
import { runPython } from "../helpers/python.js";
import { storeConsumers } from "../helpers/storeConsumers.js";

const v5session = (clientId: string, expiry: number) => ({
  protocolVersion: 5 as const,
  clientId,
  clean: false,
  properties: { sessionExpiryInterval: expiry },
});

describe("MQTT session lifecycle with third-party clients (embedded default)", () => {
  let gw: GatewayHandle & { natsUrl: string };
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const storeConsumersUnder = (under: string) => storeConsumers(jsm, under);

  beforeAll(async () => {
    gw = await startEmbeddedGateway();
    nc = await connect({ servers: gw.natsUrl });
    jsm = await jetstreamManager(nc);
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
  });

  it("100 quick cycles with mqtt.js, then 100 with paho, of one client id leave no orphan consumer; the session is whole afterwards", {
    timeout: 120_000,
  }, async () => {
    for (let i = 0; i < 100; i++) {
      const persistent = i % 2 === 0;
      const c = await connectMqtt(
        gw.port("mqtt"),
        persistent ? v5session("flaky", 60) : { protocolVersion: 5, clientId: "flaky", clean: true },
      );
      if (persistent) await c.subscribeAsync("flaky/#", { qos: 1 });
      // Every third cycle the link dies instead of saying goodbye.
      if (i % 3 === 0) c.stream.destroy();
      else await c.endAsync();
    }
    const paho = runPython(join(import.meta.dirname, "clients", "paho_flapper.py"), [
      String(gw.port("mqtt")),
      "flaky",
      "100",
      "flaky/#",
    ]);
    expect((await paho.upTo(1, 120_000))[0]).toEqual({ cycles: 100 });
    // paho's last cycle (99) was a clean start; one more persistent session: exactly one
    // consumer for its one subscription, and it gets what is published while it is away.
    const last = await connectMqtt(gw.port("mqtt"), v5session("flaky", 60));
    expect(last.connack.sessionPresent).toBe(false);
    await last.subscribeAsync("flaky/#", { qos: 1 });
    await last.endAsync();
    await eventually(
      async () => ((await storeConsumersUnder("flaky.>")).length === 1 ? true : undefined),
      10_000,
      "one consumer for the one session",
    );
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await pub.publishAsync("flaky/x", "while away", { qos: 1 });
    const { client: back, inbox } = await connectCollecting(gw.port("mqtt"), {
      ...v5session("flaky", 60),
      resubscribe: false,
    });
    expect(back.connack.sessionPresent).toBe(true);
    expect((await inbox.count(1)).map((m) => m.payload.toString())).toEqual(["while away"]);
    await Promise.all([
      pub.endAsync(),
      back.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } }),
    ]);
    await eventually(
      async () => ((await storeConsumersUnder("flaky.>")).length === 0 ? true : undefined),
      10_000,
      "no consumer once the session ended",
    );
  });

  it("MQTT 5 3.1.3.2.2: mqtt.js with Session Expiry 2 and Will Delay 5 loses its link: the will goes when the session ends, at about 2 s", async () => {
    const watcher = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await watcher.subscribeAsync("wills/short/#", { qos: 1 });
    const inbox = collect(watcher);
    const dying = await connectMqtt(gw.port("mqtt"), {
      ...v5session("will-session", 2),
      will: {
        topic: "wills/short/2",
        payload: Buffer.from("gone"),
        qos: 1,
        retain: false,
        properties: { willDelayInterval: 5 },
      },
    });
    const dropped = Date.now();
    dying.stream.destroy();
    // Not at the drop (the session lives 2 s), and not at the will's 5 s delay.
    const [will] = await inbox.count(1, 4_500);
    const after = Date.now() - dropped;
    expect(will!.payload.toString()).toBe("gone");
    expect(after).toBeGreaterThanOrEqual(1_800);
    await watcher.endAsync();
  });

  it("[MQTT-4.4.0-1] mqtt.js that never acknowledges (customHandleAcks holds them) gets its QoS 1 and 2 deliveries again within 1 s of reconnecting, the held one with DUP", async () => {
    const held: string[] = [];
    const holder = await connectMqtt(gw.port("mqtt"), {
      ...v5session("holder", 600),
      // The application never finishes with the first: no PUBACK, and mqtt.js reads
      // nothing more until it does, so the second waits unread in the socket.
      customHandleAcks: (_topic, message) => {
        held.push(message.toString());
      },
    });
    await holder.subscribeAsync("held/+", { qos: 2 });
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await pub.publishAsync("held/one", "q1", { qos: 1 });
    await pub.publishAsync("held/two", "q2", { qos: 2 });
    await eventually(async () => (held.length === 1 ? true : undefined), 5_000, "the first delivered and held");
    holder.stream.destroy();
    const { client: back, inbox } = await connectCollecting(gw.port("mqtt"), {
      ...v5session("holder", 600),
      resubscribe: false,
    });
    const again = await inbox.count(2, 1_000);
    expect(again.map((m) => m.payload.toString())).toEqual(["q1", "q2"]);
    // The held one went out before: DUP. (The second may not have left the gateway.)
    expect(again[0]!.packet.dup).toBe(true);
    await Promise.all([
      pub.endAsync(),
      back.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } }),
    ]);
  });

  it("sessions that expire take their consumers with them, without the client coming back", {
    timeout: 150_000,
  }, async () => {
    for (let i = 0; i < 3; i++) {
      const c = await connectMqtt(gw.port("mqtt"), v5session(`expiring-${i}`, 1));
      await c.subscribeAsync(`expiring/${i}/#`, { qos: 1 });
      await c.endAsync();
    }
    expect((await storeConsumersUnder("expiring.")).length).toBe(3);
    // nats-server removes a consumer nobody pulls after its inactive threshold: the session
    // expiry, but at least a minute (docs/decisions/mqtt-sessions.md, "Stored delivery").
    await eventually(
      async () => ((await storeConsumersUnder("expiring.")).length === 0 ? true : undefined),
      120_000,
      "expired sessions' consumers gone",
    );
  });
});
