// The JetStream feed on its own, against a real nats-server with short pulls: it asks for
// exactly what it is told, renews a pull that ran out, and gives back what it holds.
import { AckPolicy, type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FeedSink, Pending } from "../../src/actors/amqp/feed.js";
import { jetStreamFeed } from "../../src/actors/amqp/jsFeed.js";
import { NatsSeam } from "../../src/actors/client/natsSeam.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";

function sink() {
  const offered: Pending[] = [];
  let refills = 0;
  const s: FeedSink & { offered: Pending[]; refills(): number } = {
    offered,
    refills: () => refills,
    offer: (m) => offered.push(m),
    fault: (e) => {
      throw new Error(e.description);
    },
    refill: () => {
      refills++;
    },
  };
  return s;
}

describe("jetStreamFeed", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "FEED", subjects: ["feed.>"] });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  async function consumer(name: string) {
    await jsm.consumers.add("FEED", {
      durable_name: name,
      ack_policy: AckPolicy.Explicit,
      filter_subject: `feed.${name}`,
    });
    return (await jsm.consumers.info("FEED", name)).name;
  }

  it("pulls what it is asked for, no more; settles by the outcome", async () => {
    const name = await consumer("exact");
    for (let i = 0; i < 5; i++) nc.publish(`feed.${name}`, `m${i}`);
    await nc.flush();
    const s = sink();
    const feed = jetStreamFeed({
      nats: NatsSeam.of(nc),
      stream: "FEED",
      consumer: name,
      source: "feed.>",
      sink: s,
      expiresMs: 5_000,
      ackWaitMs: 30_000,
    });
    feed.want(2);
    await eventually(() => (s.offered.length === 2 ? true : undefined), 5_000, "two offered");
    // The link holds those two now: it wants nothing more.
    feed.want(0);
    expect((await jsm.consumers.info("FEED", name)).num_ack_pending).toBe(2);
    feed.settle(s.offered[0]!, "accepted");
    feed.settle(s.offered[1]!, "rejected");
    await eventually(
      async () => ((await jsm.consumers.info("FEED", name)).num_ack_pending === 0 ? true : undefined),
      5_000,
      "settled",
    );
    feed.close();
  });

  it("renews a pull that ran out, so a message published later still arrives", async () => {
    const name = await consumer("renew");
    const s = sink();
    const feed = jetStreamFeed({
      nats: NatsSeam.of(nc),
      stream: "FEED",
      consumer: name,
      source: "feed.>",
      sink: s,
      expiresMs: 1_000,
      ackWaitMs: 30_000,
    });
    feed.want(1);
    await eventually(() => (s.refills() > 0 ? true : undefined), 5_000, "the first pull expired");
    feed.want(1);
    nc.publish(`feed.${name}`, "late");
    await eventually(() => (s.offered.length === 1 ? true : undefined), 5_000, "the late message");
    feed.close();
  });

  it("a drain pull returns at once when nothing is there", async () => {
    const name = await consumer("drain");
    const feed = jetStreamFeed({
      nats: NatsSeam.of(nc),
      stream: "FEED",
      consumer: name,
      source: "feed.>",
      sink: sink(),
      expiresMs: 30_000,
      ackWaitMs: 30_000,
    });
    const started = Date.now();
    await feed.drain(3);
    expect(Date.now() - started).toBeLessThan(2_000);
    feed.close();
  });

  it("closing gives back what it held", async () => {
    const name = await consumer("close");
    nc.publish(`feed.${name}`, "held");
    await nc.flush();
    const s = sink();
    const feed = jetStreamFeed({
      nats: NatsSeam.of(nc),
      stream: "FEED",
      consumer: name,
      source: "feed.>",
      sink: s,
      expiresMs: 5_000,
      ackWaitMs: 30_000,
    });
    feed.want(1);
    await eventually(() => (s.offered.length === 1 ? true : undefined), 5_000, "held");
    feed.close();
    // Given back: the next reader gets it at once, not after the ack wait.
    const next = sink();
    const again = jetStreamFeed({
      nats: NatsSeam.of(nc),
      stream: "FEED",
      consumer: name,
      source: "feed.>",
      sink: next,
      expiresMs: 5_000,
      ackWaitMs: 30_000,
    });
    again.want(1);
    await eventually(() => (next.offered.length === 1 ? true : undefined), 5_000, "redelivered");
    expect(next.offered[0]!.ack?.redeliveries).toBe(1);
    again.close();
  });

  // A pull answered 503 (no responders) is a deleted queue only when JetStream says so:
  // a restarted server answers 503 too until it has loaded its consumers.
  it("a queue that does not exist, or is deleted while pulled, is a fault (amqp:resource-deleted)", async () => {
    const faults: string[] = [];
    const recording = (): FeedSink => ({
      ...sink(),
      fault: (e) => void faults.push(`${e.condition} ${e.description}`),
    });
    const missing = jetStreamFeed({
      nats: NatsSeam.of(nc),
      stream: "FEED",
      consumer: "never-made",
      source: "feed.>",
      sink: recording(),
      expiresMs: 5_000,
      ackWaitMs: 30_000,
    });
    missing.want(1);
    await eventually(() => (faults.length === 1 ? true : undefined), 5_000, "missing queue faulted");
    expect(faults[0]).toMatch(/^amqp:resource-deleted .*never-made/);
    missing.close();

    const name = await consumer("deleted");
    const feed = jetStreamFeed({
      nats: NatsSeam.of(nc),
      stream: "FEED",
      consumer: name,
      source: "feed.>",
      sink: recording(),
      expiresMs: 5_000,
      ackWaitMs: 30_000,
    });
    feed.want(1);
    await eventually(
      async () => ((await jsm.consumers.info("FEED", name)).num_waiting === 1 ? true : undefined),
      5_000,
      "pull waiting",
    );
    await jsm.consumers.delete("FEED", name);
    await eventually(() => (faults.length === 2 ? true : undefined), 5_000, "deleted queue faulted");
    expect(faults[1]).toMatch(/^amqp:resource-deleted .*deleted/);
    feed.close();
  });

  // Deterministic form of the restart case (test/faults/natsRestart.test.ts): a server
  // whose JetStream does not answer (here: none at all) answers every pull 503; that is
  // not a deleted queue, so the feed keeps renewing its pull instead of faulting.
  it("a pull answered 503 while JetStream does not answer is renewed, not a fault", async () => {
    const bare = await startNatsServer({ jetstream: false });
    const bareNc = await connect({ servers: bare.url });
    try {
      const faults: string[] = [];
      const s = sink();
      // As the receiver link does: a refill asks for the credit again.
      const refill = s.refill;
      const feed = jetStreamFeed({
        nats: NatsSeam.of(bareNc),
        stream: "FEED",
        consumer: "later",
        source: "feed.>",
        sink: {
          ...s,
          refill: () => {
            refill();
            feed.want(1);
          },
          fault: (e) => void faults.push(`${e.condition} ${e.description}`),
        },
        expiresMs: 5_000,
        ackWaitMs: 30_000,
      });
      feed.want(1);
      // The sink is asked to pull again (after the pause for a pull cut short at once).
      await eventually(() => (s.refills() >= 1 ? true : undefined), 10_000, "pull renewed");
      // The consumer-info check of that 503 has had its 2 s timeout or no-responders answer.
      await eventually(() => (s.refills() >= 2 ? true : undefined), 10_000, "pull renewed twice");
      expect(faults).toEqual([]);
      feed.close();
    } finally {
      await bareNc.close();
      await bare.stop();
    }
  });
});
