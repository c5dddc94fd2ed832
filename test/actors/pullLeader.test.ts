// A pull engine's long poll waits at the consumer's leader. When that node dies while the
// gateway's own connection stays on another node, the connection hears nothing of it, but
// nats-server answers the waiting pull "409 Leadership Change" once a new leader is elected:
// the engine asks again then, so even a long poll goes on within seconds (the 10 s pulls of
// MQTT stored subscriptions, docs/decisions/session-consumers.md, rely on it).
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type NatsClusterHandle, startNatsCluster } from "../helpers/natsCluster.js";
import { eventually } from "../helpers/poll.js";
import { acknowledgingReader } from "../helpers/pullReader.js";

describe("a long poll whose consumer leader dies", () => {
  let cluster: NatsClusterHandle;
  beforeAll(async () => {
    cluster = await startNatsCluster({ size: 3 });
  }, 60_000);
  afterAll(async () => cluster?.stop());

  it("is asked again at the new leader once it is elected, not when the poll's timer runs out", async () => {
    const admin = await connect({ servers: cluster.urls });
    const jsm = await jetstreamManager(admin);
    await jsm.streams.add({ name: "LEAD", subjects: ["lead.>"], num_replicas: 3 });
    await jsm.consumers.add("LEAD", {
      durable_name: "reader",
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      num_replicas: 3,
    });
    const leader = (await jsm.consumers.info("LEAD", "reader")).cluster?.leader;
    expect(leader).toBeDefined();
    const [other] = Object.entries(cluster.nodes).filter(([name]) => name !== leader);
    // The gateway's connection stays on a node that lives.
    const gateway: NatsConnection = await connect({ servers: other![1].url, maxReconnectAttempts: -1 });
    const seen: string[] = [];
    const pull = acknowledgingReader(gateway, "LEAD", "reader", 120_000, seen);
    const publisher = await connect({ servers: other![1].url, maxReconnectAttempts: -1 });
    await jetstream(publisher).publish("lead.a", "before");
    await eventually(async () => (seen.includes("before") ? true : undefined));
    await cluster.kill(leader!);
    await eventually(
      () =>
        jetstream(publisher, { timeout: 2_000 })
          .publish("lead.a", "after")
          .catch(() => undefined),
      30_000,
    );
    await eventually(
      async () => (seen.includes("after") ? true : undefined),
      10_000,
      "delivered after the leader died",
    );
    pull.stop();
    await gateway.close();
    await publisher.close();
    await admin.close().catch(() => {});
  }, 90_000);
});
