// Issue 22, item 1: a node of a 3-node JetStream cluster is SIGKILLed at several moments of a
// persistent subscriber's life while a publisher on another gateway sends QoS 1 messages to
// a bound R3 stream. Every acknowledged message reaches the subscriber, in order, and every
// publish is answered within the documented bound (docs/decisions/faults.md). One cluster
// serves every row: the killed node is started again, and the next row waits until every
// replica has caught up, so each row loses exactly one node.
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { MqttClient } from "mqtt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { connectCollecting, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsClusterHandle, startNatsCluster } from "../helpers/natsCluster.js";
import { eventually } from "../helpers/poll.js";
import { metric, pace } from "./util.js";

/** STORED_ANSWER_MS (30 s from when the gateway reads it) and a margin for a loaded machine. */
const ANSWER_BOUND_MS = 35_000;
const MESSAGES = 150;

const persistent = (clientId: string) => ({
  protocolVersion: 5 as const,
  clientId,
  clean: false,
  properties: { sessionExpiryInterval: 3600 },
});

/** As a client with a reconnect policy: CONNACK "server unavailable" (the bucket electing a leader) is tried again. */
function resume(port: number, clientId: string) {
  return eventually(
    () =>
      connectCollecting(port, { ...persistent(clientId), resubscribe: false }).catch((e: Error) => {
        if (!/unavailable|closed before CONNACK|ECONNRESET/i.test(e.message)) throw e;
        return undefined;
      }),
    60_000,
    `${clientId} resumed`,
  );
}

type Moment = "subscriber offline" | "subscriber resuming" | "publisher's node" | "sessions leader" | "stream leader";

describe("a JetStream cluster node killed at each moment of a persistent subscriber's life", () => {
  let cluster: NatsClusterHandle;
  let gwA: GatewayHandle;
  let gwB: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  const leaderOf = async (stream: string) => {
    const leader = (await jsm.streams.info(stream)).cluster?.leader;
    if (!leader) throw new Error(`${stream} has no leader`);
    return leader;
  };

  /** Every replica of the gateway's streams and the bound ones current: the cluster can lose one more node. */
  let unhealthy = "";
  const healthy = () =>
    eventually(
      async () => {
        for await (const s of jsm.streams.list()) {
          const c = s.cluster;
          if (!c?.leader || (c.replicas ?? []).some((r) => !r.current || r.offline)) {
            unhealthy = `${s.config.name}: ${JSON.stringify(c)}`;
            return undefined;
          }
        }
        return true;
      },
      60_000,
      "every stream replica current",
    ).catch((e: Error) => {
      throw new Error(`${e.message}; ${unhealthy}`);
    });

  beforeAll(async () => {
    cluster = await startNatsCluster({ size: 3 });
    nc = await connect({ servers: cluster.urls.split(","), maxReconnectAttempts: -1 });
    jsm = await jetstreamManager(nc, { timeout: 10_000 });
    await jsm.streams.add({ name: "FLEET", subjects: ["fleet.>"], num_replicas: 3 });
    // One replica, so killing its node takes the stream away until the node is back (the waiting test).
    await jsm.streams.add({ name: "DEPOT", subjects: ["depot.>"], num_replicas: 1 });
    const config = {
      bindings: [{ stream: "FLEET" }, { stream: "DEPOT" }],
      log: { level: "info", format: "json" },
    };
    const { n1, n2, n3 } = cluster.nodes;
    // A on node 1 with node 3 as its second URL, B on node 2 (both learn the rest from INFO).
    [gwA, gwB] = await Promise.all([
      startGateway({ nats: `${n1!.url},${n3!.url}`, config }),
      startGateway({ nats: n2!.url, config }),
    ]);
  }, 120_000);

  afterAll(async () => {
    await nc?.close();
    await Promise.all([gwA?.stop(), gwB?.stop()]);
    await cluster?.stop();
  });

  const rows: Array<{ moment: Moment; killAt: number }> = [
    // The node of the gateway the subscriber left, while it is away.
    { moment: "subscriber offline", killAt: 75 },
    // The leader of the consumer it reads, as it connects again elsewhere.
    { moment: "subscriber resuming", killAt: 100 },
    // The node the publisher's gateway is connected to, while the subscriber reads.
    { moment: "publisher's node", killAt: 25 },
    // Issue 22's own case: the sessions bucket's leader, while the subscriber is away.
    { moment: "sessions leader", killAt: 75 },
    // The bound stream's leader, while the subscriber reads.
    { moment: "stream leader", killAt: 25 },
  ];

  it.each(rows.map((r, i) => ({ ...r, i })))(
    "node killed ($moment): every acknowledged message delivered in order, every publish answered",
    async ({ moment, killAt, i }) => {
      const t0 = Date.now();
      const phases: string[] = [];
      const mark = (what: string) => phases.push(`${what} ${Date.now() - t0}`);
      await healthy();
      mark("healthy");
      const clientId = `nl-sub-${i}`;
      const topic = `fleet/${i}/temp`;
      let { client: sub, inbox } = await connectCollecting(gwA.port("mqtt"), persistent(clientId));
      await sub.subscribeAsync("fleet/+/temp", { qos: 1 });
      const received: string[] = [];
      const drain = () => received.push(...inbox.seen.splice(0).map((s) => s.payload.toString()));

      const pub = await connectMqtt(gwB.port("mqtt"), { protocolVersion: 5, clientId: `nl-pub-${i}` });
      let pubClosed = false;
      pub.on("close", () => (pubClosed = true));
      const acked: string[] = [];
      const answers: Array<{ ms: number; ok: boolean }> = [];

      const victim = async (): Promise<string> => {
        switch (moment) {
          case "subscriber offline":
            return "n1";
          case "publisher's node":
            return "n2";
          case "sessions leader":
            return leaderOf("KV_MQGW_SESSIONS");
          case "stream leader":
            return leaderOf("FLEET");
          case "subscriber resuming": {
            // The session's consumer: the only one on FLEET (each row ends its session).
            for await (const c of jsm.consumers.list("FLEET")) if (c.cluster?.leader) return c.cluster.leader;
            throw new Error("no consumer on FLEET");
          }
        }
      };
      let killed: string | undefined;
      let resumed: Promise<Awaited<ReturnType<typeof resume>>> | undefined;
      try {
        for (let k = 1; k <= MESSAGES; k++) {
          if (k === 50) {
            // Gone without DISCONNECT: the socket is destroyed.
            drain();
            sub.stream.destroy();
          }
          if (k === 100) resumed = resume(gwB.port("mqtt"), clientId);
          if (k === killAt) {
            killed = await victim();
            await cluster.kill(killed);
          }
          const payload = `m${k}`;
          const sent = Date.now();
          pub.publish(topic, payload, { qos: 1 }, (e) => {
            answers.push({ ms: Date.now() - sent, ok: !e });
            if (!e) acked.push(payload);
          });
          // The load's shape (a message every 10 ms), not a wait for anything.
          await pace(10);
        }
        mark("published");
        ({ client: sub, inbox } = (await resumed)!);
        expect(sub.connack.sessionPresent, "session present").toBe(true);

        await eventually(
          () => (answers.length === MESSAGES ? true : undefined),
          ANSWER_BOUND_MS + 5_000,
          "every answer",
        );
        mark("answered");
        expect(pubClosed, "the publisher stayed connected").toBe(false);
        const slowest = Math.max(...answers.map((a) => a.ms));
        expect(slowest, "slowest answer (ms)").toBeLessThan(ANSWER_BOUND_MS);
        expect(acked.length, "acknowledged").toBeGreaterThan(MESSAGES / 2);

        await eventually(
          () => {
            const got = new Set([...received, ...inbox.seen.map((s) => s.payload.toString())]);
            return acked.every((m) => got.has(m)) ? true : undefined;
          },
          60_000,
          `every acknowledged message (${moment})`,
        ).catch(() => undefined);
        mark("delivered");
        drain();
        const got = new Set(received);
        expect(
          acked.filter((m) => !got.has(m)),
          "acknowledged, never delivered",
        ).toEqual([]);
        // In publish order (QoS 1 may repeat: the first copy of each counts).
        const first = [...new Set(received)].map((m) => Number(m.slice(1)));
        const behind = first.findIndex((n, j) => j > 0 && n < first[j - 1]!);
        expect(behind < 0 ? "in order" : `m${first[behind]} after m${first[behind - 1]}`).toBe("in order");

        // A row's figures for the record (CI logs): how long the slowest answer took.
        console.info(
          `node loss (${moment}, ${killed}): ${acked.length}/${MESSAGES} acknowledged, slowest answer ${slowest} ms`,
        );
        await endSession(sub, gwB, clientId);
        await pub.endAsync();
        mark("ended");
      } finally {
        // The next row loses one node of a whole cluster.
        if (killed) await cluster.restart(killed);
        mark("restarted");
        console.info(`node loss (${moment}) phases, ms: ${phases.join(", ")}`);
      }
    },
    150_000,
  );

  it("a consumer deleted under a reading subscriber is made again from the floor: nothing skipped, none left behind", async () => {
    await healthy();
    const clientId = "nl-lost";
    const { client: sub, inbox } = await connectCollecting(gwA.port("mqtt"), persistent(clientId));
    await sub.subscribeAsync("fleet/lost/+", { qos: 1 });
    const pub = await connectMqtt(gwB.port("mqtt"), { protocolVersion: 5, clientId: "nl-lost-pub" });
    for (let k = 1; k <= 20; k++) await pub.publishAsync("fleet/lost/a", `l${k}`, { qos: 1 });
    await inbox.count(20, 15_000);
    const names: string[] = [];
    for await (const c of jsm.consumers.list("FLEET")) names.push(c.name);
    expect(names).toHaveLength(1);
    await jsm.consumers.delete("FLEET", names[0]!);
    for (let k = 21; k <= 40; k++) await pub.publishAsync("fleet/lost/a", `l${k}`, { qos: 1 });
    await pub.endAsync();
    const seen = await inbox.count(40, 30_000);
    expect([...new Set(seen.map((m) => m.payload.toString()))]).toEqual(
      Array.from({ length: 40 }, (_, j) => `l${j + 1}`),
    );
    const now: string[] = [];
    for await (const c of jsm.consumers.list("FLEET")) now.push(c.name);
    expect(now).toHaveLength(1);
    expect(now[0]).not.toBe(names[0]);
    await endSession(sub, gwA, clientId);
  }, 60_000);

  it("a subscription whose stream is gone waits (counted in /clients and the metrics), then delivers from the floor once it is back, nothing skipped", async () => {
    await healthy();
    const clientId = "nl-wait";
    const depotNode = await leaderOf("DEPOT");
    // Resumed on the gateway whose node stays up; the stream's only replica will not. It
    // subscribes on the other one: a resume where it left within 20 s would adopt its parked
    // reader with no JetStream request, and not see the stream gone (session-parking.md).
    const gw = depotNode === "n2" ? gwA : gwB;
    const first = gw === gwA ? gwB : gwA;
    let { client: sub, inbox } = await connectCollecting(first.port("mqtt"), persistent(clientId));
    await sub.subscribeAsync("depot/+", { qos: 1 });
    const pub = await connectMqtt(gwB.port("mqtt"), { protocolVersion: 5, clientId: "nl-wait-pub" });
    for (let k = 1; k <= 20; k++) await pub.publishAsync("depot/a", `d${k}`, { qos: 1 });
    await inbox.count(20, 15_000);
    await sub.endAsync();
    // Acknowledged while the subscriber is away: the stream keeps them.
    for (let k = 21; k <= 60; k++) await pub.publishAsync("depot/a", `d${k}`, { qos: 1 });
    await pub.endAsync();
    await cluster.kill(depotNode);
    try {
      ({ client: sub, inbox } = await resume(gw.port("mqtt"), clientId));
      expect(sub.connack.sessionPresent).toBe(true);
      await eventually(
        async () => {
          const page = (await (
            await fetch(`http://127.0.0.1:${gw.port("http")}/clients?client_id=${clientId}`)
          ).json()) as { clients: Array<{ stored_waiting: number }> };
          return page.clients[0]?.stored_waiting === 1 ? true : undefined;
        },
        30_000,
        "the subscription waiting for its stream in /clients",
      );
      expect(await metric(gw, "mqgw_stored_waiting", { protocol: "mqtt" })).toBe(1);
      // It keeps asking (backoff up to 5 s) while the stream is away: nothing arrives, nothing is lost.
      expect(inbox.seen.length).toBe(0);
      await cluster.restart(depotNode);
      const seen = await inbox.count(40, 60_000);
      const payloads = [...new Set(seen.map((s) => s.payload.toString()))];
      expect(payloads).toEqual(Array.from({ length: 40 }, (_, j) => `d${j + 21}`));
      expect(await metric(gw, "mqgw_stored_waiting", { protocol: "mqtt" })).toBe(0);
    } finally {
      await cluster.restart(depotNode);
    }
    await endSession(sub, gw, clientId);
    // No consumer of an earlier incarnation is left behind.
    await eventually(
      async () => {
        let n = 0;
        for await (const _ of jsm.consumers.list("DEPOT")) n++;
        return n === 0 ? true : undefined;
      },
      30_000,
      "DEPOT's consumers deleted",
    );
  }, 150_000);

  /** Ends the session (Clean Start, no expiry): its consumers go, so the next row starts alone. */
  async function endSession(sub: MqttClient, gw: GatewayHandle, clientId: string): Promise<void> {
    await sub.endAsync();
    const c = await eventually(
      () =>
        connectMqtt(gw.port("mqtt"), { protocolVersion: 5, clientId, clean: true }).catch((e: Error) => {
          if (!/unavailable|closed before CONNACK/i.test(e.message)) throw e;
          return undefined;
        }),
      60_000,
      `${clientId} session ended`,
    );
    await c.endAsync();
  }
});
