// Consumers a crash or a lost answer leaves behind (a resume cut short after it made its
// consumer, a removal whose delete was lost) go with the next session sweep: only those the
// gateway's sessions bucket made and none of its records names. docs/decisions/mqtt-sessions.md.
import { AckPolicy, type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, metric, startGateway } from "../helpers/gateway.js";
import { connectCollecting, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { storeConsumers } from "../helpers/storeConsumers.js";

const keeper = {
  protocolVersion: 5 as const,
  clientId: "keeper",
  clean: false,
  properties: { sessionExpiryInterval: 3600 },
};

describe("the session sweep removes orphan consumers", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startNatsServer();
    gw = await startGateway({
      nats: nats.url,
      config: { mqtt: { listen: "127.0.0.1:0", session_sweep_interval: "1s" } },
    });
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  /** A consumer on the MQTT store as the gateway names and tags its sessions' consumers, or as someone else's. */
  const add = (name: string, metadata?: Record<string, string>) =>
    jsm.consumers.add("MQGW_MSGS", {
      durable_name: name,
      ack_policy: AckPolicy.Explicit,
      filter_subject: "plant.orphan.>",
      ...(metadata ? { metadata } : {}),
    });

  it("deletes what its bucket's sessions made and no record names; keeps the named, the foreign and the untagged", async () => {
    const first = await connectMqtt(gw.port("mqtt"), keeper);
    await first.subscribeAsync("plant/keep/#", { qos: 1 });
    await first.endAsync();
    const [named] = await storeConsumers(jsm, "plant.keep");
    expect(named).toBeDefined();

    const orphan = "mqgw-0123456789abcdef01234567-89abcdef";
    await add(orphan, { mqgw_sessions_bucket: "MQGW_SESSIONS" });
    const foreign = "mqgw-fedcba9876543210fedcba98-01234567";
    await add(foreign, { mqgw_sessions_bucket: "ANOTHER_DEPLOYMENT" });
    const untagged = "mqgw-00112233445566778899aabb";
    await add(untagged);
    const amqpDurable = "mqgw-amqp-00112233445566778899aabb";
    await add(amqpDurable, { mqgw_sessions_bucket: "MQGW_SESSIONS" });
    await add("operators-reader", { mqgw_sessions_bucket: "MQGW_SESSIONS" });

    // Judged in one pass: once the orphan is gone, the pass has looked at all of them.
    await eventually(
      async () => ((await storeConsumers(jsm)).includes(orphan) ? undefined : true),
      15_000,
      "orphan removed",
    );
    expect((await storeConsumers(jsm)).sort()).toEqual(
      [named!, foreign, untagged, amqpDurable, "operators-reader"].sort(),
    );
    expect(await metric(gw, "mqgw_orphan_consumers_removed_total", {})).toBeGreaterThanOrEqual(1);

    // The session the sweep left alone still gets what it missed.
    const publisher = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await publisher.publishAsync("plant/keep/1", "while away", { qos: 1 });
    await publisher.endAsync();
    const back = await connectCollecting(gw.port("mqtt"), keeper);
    expect(back.client.connack.sessionPresent).toBe(true);
    expect((await back.inbox.count(1)).map((m) => m.payload.toString())).toEqual(["while away"]);
    await back.client.endAsync();
  });
});
