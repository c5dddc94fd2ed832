// A reader that stops while messages flow (an AMQP link detached, an MQTT session taken
// over) hands its consumer to the next one: what the server sent the stopped reader's pull
// before it heard of the stop must reach the next reader at once, not after the ack wait.
import { AckPolicy, DeliverPolicy, jetstreamManager } from "@nats-io/jetstream";
import { connect, type Msg, type NatsConnection, nanos } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ACK, JetStreamPull, settle } from "../../src/actors/client/jetStreamPull.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";

const ACK_WAIT_MS = 30_000;

describe("a pull consumer handed from one reader to the next", () => {
  let nats: NatsServerHandle;
  let gateway: NatsConnection;
  let publisher: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer();
    gateway = await connect({ servers: nats.url });
    publisher = await connect({ servers: nats.url });
    const jsm = await jetstreamManager(publisher);
    await jsm.streams.add({ name: "HANDOVER", subjects: ["handover.>"] });
    await jsm.consumers.add("HANDOVER", {
      durable_name: "reader",
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(ACK_WAIT_MS),
    });
  });
  afterAll(async () => {
    await gateway?.close();
    await publisher?.close();
    await nats?.stop();
  });

  /** A reader that takes and acknowledges everything, asking for 100 at a time. */
  function reader(seen: Set<string>): JetStreamPull {
    let pull!: JetStreamPull;
    const r = {
      message(m: Msg) {
        seen.add(m.string());
        settle(gateway, m.reply!, ACK);
        pull.want(100);
      },
      refill: () => pull.want(100),
    };
    pull = new JetStreamPull({
      nc: gateway,
      stream: "HANDOVER",
      consumer: "reader",
      reader: r,
      expiresMs: 30_000,
      onGone: "end",
    });
    pull.want(100);
    return pull;
  }

  // The stop lands at another moment of the flow each round: before, amid and after the server's sends.
  it.each([0, 1, 2, 3, 5, 8, 13, 21])(
    "every message reaches the next reader when the stop comes %i ms into a flow",
    async (stopAfterMs) => {
      const seen = new Set<string>();
      const sent: string[] = [];
      let first = reader(seen);
      let sending = true;
      const flow = (async () => {
        for (let i = 0; sending || i < 20; i++) {
          const body = `${stopAfterMs}-${i}`;
          publisher.publish(`handover.${stopAfterMs}`, body);
          sent.push(body);
          if (i % 5 === 4) await publisher.flush();
        }
      })();
      await new Promise((r) => setTimeout(r, stopAfterMs));
      first.stop();
      first = reader(seen);
      sending = false;
      await flow;
      await publisher.flush();
      // Far less than the ack wait: a message dropped in the handover would come back only after it.
      await eventually(async () => (sent.every((b) => seen.has(b)) ? true : undefined), 5_000, "all delivered");
      first.stop();
      expect(sent.filter((b) => !seen.has(b))).toEqual([]);
    },
  );
});
