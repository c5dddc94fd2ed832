// A pull the gateway gave up on (its 408 did not come in time) may still be held by the
// server, which counts its expiry from when it took the request: seconds later when it was
// busy, or, as here, stopped. What it sends to that pull must reach the reader, and the pin
// it gives with it must be the reader's, or a parked session's message waits out the ack
// wait and the pin's priority timeout (30 s each) before anyone gets it.
import { readFileSync } from "node:fs";
import { AckPolicy, DeliverPolicy, type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type Msg, type NatsConnection, nanos } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ACK, JetStreamPull, settle } from "../../src/actors/client/jetStreamPull.js";
import { PIN_GROUP, PINNED } from "../../src/actors/mqtt/pinnedTakeover.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";

const EXPIRES_MS = 2_000;

/** A process's state letter (`T`: stopped by a signal), from /proc. */
const processState = (pid: number): string => readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[0]!;
/** Far below the ack wait and the pin's priority timeout (30 s): what is lost to either comes later. */
const PROMPTLY_MS = 10_000;

describe("a pull that lapsed while the server still held it", () => {
  let nats: NatsServerHandle;
  let gateway: NatsConnection;
  let publisher: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startNatsServer();
    gateway = await connect({ servers: nats.url });
    publisher = await connect({ servers: nats.url });
    jsm = await jetstreamManager(publisher);
    await jsm.streams.add({ name: "LAPSED", subjects: ["lapsed.>"] });
  });
  afterAll(async () => {
    await gateway?.close();
    await publisher?.close();
    await nats?.stop();
  });

  // How long nats-server does not read (its expiry of the pull starts after; the gateway's
  // lapse comes at 4 s), and how long after the lapse the message is published: 2-3 s before
  // the server's own expiry each time, well apart from it.
  it.each([
    [4_000, 0],
    [5_000, 300],
    [6_000, 800],
  ])(
    "the reader gets what came to it (server stalled %i ms, published %i ms after the lapse)",
    async (stallMs, afterMs) => {
      const consumer = `stall${stallMs}`;
      await jsm.consumers.add("LAPSED", {
        durable_name: consumer,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.New,
        ack_wait: nanos(30_000),
        filter_subject: `lapsed.${consumer}`,
        ...PINNED,
      });
      const seen: string[] = [];
      // A parked session's reader: it asks only when told (an adoption), never on a refill.
      const pull = new JetStreamPull({
        nc: gateway,
        stream: "LAPSED",
        consumer,
        reader: {
          message(m: Msg) {
            seen.push(m.string());
            settle(gateway, m.reply!, ACK);
          },
          refill() {},
        },
        expiresMs: EXPIRES_MS,
        onGone: "retry",
        group: PIN_GROUP,
      });
      try {
        nats.process.kill("SIGSTOP");
        // The signal is asynchronous: a pull the server read before it stopped would expire on time.
        await eventually(
          () => (processState(nats.process.pid!) === "T" ? true : undefined),
          PROMPTLY_MS,
          "nats-server stopped",
        );
        // Sent while nats-server reads nothing: it takes the pull when it runs again.
        pull.want(8);
        await new Promise((r) => setTimeout(r, stallMs));
        nats.process.kill("SIGCONT");
        await eventually(() => (pull.asked === 0 ? true : undefined), PROMPTLY_MS, "the pull lapsed");
        if (afterMs > 0) await new Promise((r) => setTimeout(r, afterMs));
        publisher.publish(`lapsed.${consumer}`, "while-lapsed");
        await publisher.flush();
        // The server took the message to the pull it still held: sent (nothing pending), or,
        // that pull's inbox let go, pinned to it all the same and held.
        await eventually(
          async () => {
            const info = await jsm.consumers.info("LAPSED", consumer);
            return info.num_pending === 0 || info.priority_groups?.[0]?.pinned_client_id ? true : undefined;
          },
          PROMPTLY_MS,
          "the message taken",
        );
        // Adopted: the reader asks again.
        pull.want(8);
        await eventually(
          () => (seen.includes("while-lapsed") ? true : undefined),
          PROMPTLY_MS,
          "the message delivered",
        );
        // The pin came with it: what follows is served to this reader's pulls too.
        publisher.publish(`lapsed.${consumer}`, "after");
        await eventually(() => (seen.includes("after") ? true : undefined), PROMPTLY_MS, "the next message delivered");
        expect(seen).toEqual(["while-lapsed", "after"]);
      } finally {
        nats.process.kill("SIGCONT");
        pull.stop();
      }
    },
  );
});
