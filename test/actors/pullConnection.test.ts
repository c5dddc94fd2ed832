// A pull engine (client/jetStreamPull.ts) as an idle stored subscription meets it: long polls
// renewed on one inbox, and a nats-server that restarts under them.
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { acknowledgingReader } from "../helpers/pullReader.js";

describe("a pull engine's long polls", () => {
  const open: Array<{ close(): Promise<void> }> = [];
  let nats: NatsServerHandle;
  afterEach(async () => {
    for (const c of open.splice(0)) await c.close().catch(() => {});
    await nats?.stop();
  });
  afterAll(async () => nats?.stop());

  async function setUp(storeDir?: string, port?: number): Promise<NatsConnection> {
    nats = await startNatsServer({ storeDir, port });
    const admin = await connect({ servers: nats.url });
    open.push(admin);
    const jsm = await jetstreamManager(admin);
    await jsm.streams.add({ name: "LONG", subjects: ["long.>"] });
    await jsm.consumers.add("LONG", {
      durable_name: "reader",
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
    });
    return admin;
  }

  it("renews an expired long poll on the inbox it had: one subscription, not a SUB and UNSUB per renewal", async () => {
    const admin = await setUp();
    const requests: string[] = [];
    const tap = admin.subscribe("$JS.API.CONSUMER.MSG.NEXT.LONG.reader", {
      callback: (_e, m) => requests.push(m.reply ?? ""),
    });
    await admin.flush();
    const gateway = await connect({ servers: nats.url });
    open.push(gateway);
    const seen: string[] = [];
    const pull = acknowledgingReader(gateway, "LONG", "reader", 1_200, seen);
    // Three renewals after the first pull's 408s.
    await eventually(async () => (requests.length >= 4 ? true : undefined), 15_000, "renewed");
    expect(new Set(requests).size).toBe(1);
    // What the renewed pull is sent arrives on it.
    admin.publish("long.a", "after renewals");
    await eventually(async () => (seen.includes("after renewals") ? true : undefined));
    pull.stop();
    tap.unsubscribe();
  });

  // A stopped nats-server tells waiting pulls (409) as it goes; a killed one tells nothing. The
  // message goes into the stream before the gateway's connection is back, and after.
  it.each([
    ["killed", "before the gateway's connection is back", false],
    ["killed", "after the gateway's connection is back", true],
    ["stopped", "before the gateway's connection is back", false],
    ["stopped", "after the gateway's connection is back", true],
  ])(
    "asks again as soon as a %s nats-server is back (a message stored %s), not when its poll's timer runs out",
    async (how, _when, afterReconnect) => {
      const admin = await setUp();
      const { port, storeDir } = nats;
      const gateway = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
      open.push(gateway);
      const back = (async () => {
        for await (const s of gateway.status()) if (s.type === "reconnect") return;
      })();
      const seen: string[] = [];
      // A poll far longer than the test waits: only hearing of the reconnect renews it in time.
      const pull = acknowledgingReader(gateway, "LONG", "reader", 120_000, seen);
      admin.publish("long.a", "before the restart");
      await eventually(async () => (seen.includes("before the restart") ? true : undefined));
      if (how === "killed") await kill(nats);
      else await nats.stop();
      nats = await startNatsServer({ storeDir, port });
      const publisher = await connect({ servers: nats.url });
      open.push(publisher);
      if (afterReconnect) await back;
      // Stored for sure (JetStream answered) before the wait starts.
      await eventually(() =>
        jetstream(publisher)
          .publish("long.a", "after the restart")
          .catch(() => undefined),
      );
      await eventually(async () => (seen.includes("after the restart") ? true : undefined), 10_000, "delivered");
      pull.stop();
    },
  );
});

/** kill -9: the server says nothing to anyone as it goes. */
function kill(nats: NatsServerHandle): Promise<void> {
  return new Promise((resolve) => {
    nats.process.once("exit", () => resolve());
    nats.process.kill("SIGKILL");
  });
}
