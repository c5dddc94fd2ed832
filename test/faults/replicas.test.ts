// Issue 12 item 9: on a 3-node JetStream cluster the gateway's own state (sessions bucket,
// retained stream, MQTT store) is replicated, so losing the node that leads the sessions
// bucket loses no session and no acknowledged message.
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectCollecting, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsClusterHandle, startNatsCluster } from "../helpers/natsCluster.js";
import { eventually } from "../helpers/poll.js";

const session = (clientId: string) => ({
  protocolVersion: 5 as const,
  clientId,
  clean: false,
  properties: { sessionExpiryInterval: 3600 },
});

/**
 * Connects as a client with a reconnect policy does: a CONNACK "server unavailable" (the
 * sessions bucket had no leader for a moment) is answered by trying again.
 */
function reconnect(port: number, clientId: string) {
  return eventually(
    () =>
      connectCollecting(port, { ...session(clientId), resubscribe: false }).catch((e: Error) => {
        if (!/unavailable/i.test(e.message)) throw e;
        return undefined;
      }),
    60_000,
    `${clientId} connected`,
  );
}

describe("the gateway's streams on a 3-node JetStream cluster", () => {
  let cluster: NatsClusterHandle;
  let gw1: GatewayHandle;
  let gw2: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    cluster = await startNatsCluster({ size: 3 });
    nc = await connect({ servers: cluster.urls.split(",") });
    jsm = await jetstreamManager(nc);
    // An operator's stream (R3), and a retained stream someone made earlier with one replica.
    await jsm.streams.add({ name: "PLANT", subjects: ["plant.>"], num_replicas: 3 });
    await jsm.streams.add({
      name: "MQGW_RETAINED",
      subjects: ["$MQG.retained.>"],
      max_msgs_per_subject: 1,
      allow_direct: true,
      num_replicas: 1,
    });
    const config = { bindings: [{ stream: "PLANT" }], log: { level: "info", format: "json" } };
    // Two gateways on different nodes (each learns the others from the cluster's INFO).
    [gw1, gw2] = await Promise.all([
      startGateway({ nats: cluster.nodes.n1!.url, config }),
      startGateway({ nats: cluster.nodes.n2!.url, config }),
    ]);
  }, 120_000);
  afterAll(async () => {
    await nc?.close();
    await Promise.all([gw1?.stop(), gw2?.stop()]);
    await cluster?.stop();
  });

  it("creates the sessions bucket and the MQTT store with 3 replicas, and names an existing stream with fewer at start", async () => {
    const c = await connectMqtt(gw1.port("mqtt"), session("replicas-probe"));
    await c.subscribeAsync("probe/+", { qos: 1 });
    await c.endAsync();
    for (const stream of ["KV_MQGW_SESSIONS", "MQGW_MSGS"]) {
      expect((await jsm.streams.info(stream)).config.num_replicas, stream).toBe(3);
    }
    const warning = await gw1.waitForLog((l) => l.stream === "MQGW_RETAINED" && l.key === "mqtt.stream_replicas");
    expect(warning).toMatchObject({ replicas: 1, wanted: 3 });
  });

  it("a persistent QoS 1 subscriber moves between gateways while the node leading the sessions bucket is killed: session present, every acknowledged message, in order", async () => {
    const topics = ["plant/cl/1", "free/cl/1"];
    let sub = await connectMqtt(gw1.port("mqtt"), session("mover"));
    await sub.subscribeAsync(["plant/cl/+", "free/cl/+"], { qos: 1 });
    const received: string[] = [];
    let seen = collect(sub).seen;

    // One publisher on the other gateway, each publish's PUBACK awaited; only acknowledged ones count.
    const pub = await connectMqtt(gw2.port("mqtt"), { protocolVersion: 5, clientId: "cl-pub", reconnectPeriod: 500 });
    const acked: string[] = [];
    let stop = false;
    const publishing = (async () => {
      for (let i = 0; !stop; i++) {
        const topic = topics[i % 2]!;
        try {
          await pub.publishAsync(topic, `m${i}`, { qos: 1 });
          acked.push(`${topic}=m${i}`);
        } catch {
          // Refused (0x80 while JetStream elects a leader) or lost with the connection: not acknowledged.
        }
        // The load's shape, not a wait for anything: about 100 messages a second.
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    const ackedAtLeast = (n: number) =>
      eventually(() => (acked.length >= n ? true : undefined), 60_000, `${n} acknowledged`);

    await ackedAtLeast(40);
    await sub.endAsync();
    received.push(...seen.map((s) => `${s.topic}=${s.payload}`));
    await ackedAtLeast(80);
    const leader = (await jsm.streams.info("KV_MQGW_SESSIONS")).cluster?.leader;
    expect(leader).toBeDefined();
    await cluster.kill(leader!);
    await ackedAtLeast(120);
    ({
      client: sub,
      inbox: { seen },
    } = await reconnect(gw2.port("mqtt"), "mover"));
    expect(sub.connack.sessionPresent).toBe(true);
    await ackedAtLeast(200);
    await sub.endAsync();
    received.push(...seen.map((s) => `${s.topic}=${s.payload}`));
    ({
      client: sub,
      inbox: { seen },
    } = await reconnect(gw1.port("mqtt"), "mover"));
    expect(sub.connack.sessionPresent).toBe(true);
    await ackedAtLeast(240);
    stop = true;
    await publishing;
    const total = [...new Set(acked)];
    await eventually(
      () =>
        new Set([...received, ...seen.map((s) => `${s.topic}=${s.payload}`)]).size >= total.length ? true : undefined,
      60_000,
      "every acknowledged message",
    );
    received.push(...seen.map((s) => `${s.topic}=${s.payload}`));
    const got = new Set(received);
    expect(total.filter((m) => !got.has(m))).toEqual([]);
    // In publish order per topic (duplicates allowed at QoS 1: the first copy of each counts).
    const order = (m: string) => Number(m.slice(m.indexOf("=m") + 2));
    for (const topic of topics) {
      const first = [...new Set(received.filter((m) => m.startsWith(`${topic}=`)))];
      const behind = first.findIndex((m, i) => i > 0 && order(m) < order(first[i - 1]!));
      expect(behind < 0 ? "in order" : `${first[behind]} after ${first[behind - 1]}`, topic).toBe("in order");
    }
    await Promise.all([sub.endAsync(), pub.endAsync()]);
  }, 180_000);
});
