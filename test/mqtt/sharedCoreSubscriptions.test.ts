// MQTT clients on one NATS connection (one set of credentials) that subscribe to the same
// subject share one NATS subscription (docs/decisions/shared-core-subscriptions.md): what
// nats-server's /connz lists for the gateway's client connection, while each client still
// gets each message once, in order, and stops getting them when it unsubscribes. A queue
// group ($share) keeps a NATS queue subscription per member, so NATS balances it.
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectCollecting, connectMqtt } from "../helpers/mqttClient.js";
import { natsSubscriptions } from "../helpers/natsMonitor.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { freePort } from "../helpers/ports.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

describe("core subscriptions shared by the clients of one NATS connection", () => {
  let nats: NatsServerHandle;
  let monitor: number;
  let gw: GatewayHandle;
  let port: number;
  let nc: NatsConnection;

  beforeAll(async () => {
    monitor = await freePort();
    nats = await startNatsServer({ config: `http: "127.0.0.1:${monitor}"` });
    nc = await connect({ servers: nats.url });
    gw = await startGateway({ nats: nats.url });
    port = gw.port("mqtt");
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  /** How many subscriptions on each subject the gateway's client connections hold, per nats-server. */
  async function natsSubscriptionCounts(): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const s of await natsSubscriptions(monitor)) {
      if (!s.connection?.endsWith(" client") || !s.subject.startsWith("shared")) continue;
      const key = s.qgroup ? `${s.subject} queue ${s.qgroup}` : s.subject;
      counts[key] = (counts[key] ?? 0) + 1;
    }
    return counts;
  }

  /** Publishes `n` numbered messages on `subject`, then waits until NATS has them all. */
  async function publish(subject: string, from: number, n: number): Promise<void> {
    for (let i = from; i < from + n; i++) nc.publish(subject, String(i));
    await nc.flush();
  }

  it("three clients on shared/#: one NATS subscription per subject, each message to each once, in order, until each leaves", async () => {
    const clients = await Promise.all([
      connectMqtt(port, { protocolVersion: 5, clientId: "share-a" }),
      connectMqtt(port, { protocolVersion: 4, clientId: "share-b" }),
      connectMqtt(port, {
        protocolVersion: 5,
        clientId: "share-c",
        clean: false,
        properties: { sessionExpiryInterval: 60 },
      }),
    ]);
    const inboxes = clients.map((c) => collect(c));
    for (const c of clients) await c.subscribeAsync("shared/#", { qos: 0 });
    expect(await natsSubscriptionCounts()).toEqual({ "shared.>": 1, shared: 1 });

    await publish("shared.x", 0, 20);
    await publish("shared", 20, 1);
    for (const inbox of inboxes) {
      const got = await inbox.count(21);
      expect(got.map((m) => m.payload.toString())).toEqual(Array.from({ length: 21 }, (_, i) => String(i)));
    }

    // One leaves the filter: the others go on, on the same NATS subscriptions.
    await clients[0]!.unsubscribeAsync("shared/#");
    expect(await natsSubscriptionCounts()).toEqual({ "shared.>": 1, shared: 1 });
    await publish("shared.y", 21, 5);
    for (const inbox of inboxes.slice(1)) await inbox.count(26);
    // What came after its UNSUBACK is not the first client's: the others' 26th message was published after it.
    expect(inboxes[0]!.seen).toHaveLength(21);

    // One disconnects (its session kept): the last holder keeps the subscriptions.
    await clients[2]!.endAsync();
    expect(await natsSubscriptionCounts()).toEqual({ "shared.>": 1, shared: 1 });
    await publish("shared.z", 26, 1);
    await inboxes[1]!.count(27);

    // The last one leaves: NATS holds nothing on these subjects for the gateway's clients.
    await clients[1]!.unsubscribeAsync("shared/#");
    await eventually(
      async () => (Object.keys(await natsSubscriptionCounts()).length === 0 ? true : undefined),
      5_000,
      "no subscription left",
    );

    // Back: the resumed session subscribes again on a SUB of its own, and gets what follows.
    const again = await connectMqtt(port, {
      protocolVersion: 5,
      clientId: "share-c",
      clean: false,
      properties: { sessionExpiryInterval: 60 },
    });
    const inbox = collect(again);
    expect(again.connack.sessionPresent).toBe(true);
    await eventually(
      async () => ((await natsSubscriptionCounts())["shared.>"] === 1 ? true : undefined),
      5_000,
      "resubscribed",
    );
    await publish("shared.w", 27, 1);
    expect((await inbox.count(1)).map((m) => m.payload.toString())).toEqual(["27"]);
    await again.endAsync();
    await Promise.all(clients.slice(0, 2).map((c) => c.endAsync()));
  });

  /** The gateway's client subscriptions on `subject`, as connection:sid: a SUB sent again is another. */
  async function sidsOf(subject: string): Promise<string[]> {
    return (await natsSubscriptions(monitor))
      .filter((s) => s.connection?.endsWith(" client") && s.subject === subject)
      .map((s) => `${s.cid}:${s.sid}`);
  }

  it("a persistent session's SUB stays for its resume here (no UNSUB, no SUB again), and goes once its expiry has passed", async () => {
    const options = {
      protocolVersion: 5 as const,
      clientId: "linger-a",
      clean: false,
      properties: { sessionExpiryInterval: 2 },
    };
    // Another client on the same NATS connection keeps it open (its last client's going closes it, SUBs and all).
    const keeper = await connectMqtt(port, { protocolVersion: 4, clientId: "linger-keeper" });
    const first = await connectMqtt(port, options);
    await first.subscribeAsync("shared/linger", { qos: 0 });
    const before = await sidsOf("shared.linger");
    expect(before).toHaveLength(1);
    await first.endAsync();

    const again = await connectMqtt(port, options);
    expect(again.connack.sessionPresent).toBe(true);
    const inbox = collect(again);
    // The same SUB: a drop that unsubscribed and a resume that subscribed again would show another sid.
    expect(await sidsOf("shared.linger")).toEqual(before);
    await publish("shared.linger", 0, 3);
    expect((await inbox.count(3)).map((m) => m.payload.toString())).toEqual(["0", "1", "2"]);

    // Gone for good: no resume within its 2 s expiry, and NATS holds nothing for it.
    await again.endAsync();
    await eventually(
      async () => ((await sidsOf("shared.linger")).length === 0 ? true : undefined),
      10_000,
      "the lingering SUB ended",
    );
    await keeper.endAsync();
  });

  it("$share/g/shared/q: each member its own NATS queue subscription, each message to one of them", async () => {
    const members = await Promise.all([
      connectMqtt(port, { protocolVersion: 5, clientId: "member-1" }),
      connectMqtt(port, { protocolVersion: 5, clientId: "member-2" }),
    ]);
    const inboxes = members.map((c) => collect(c));
    for (const c of members) await c.subscribeAsync("$share/g/shared/q", { qos: 0 });
    expect(await natsSubscriptionCounts()).toEqual({ "shared.q queue g": 2 });
    await publish("shared.q", 0, 40);
    await eventually(
      () => (inboxes[0]!.seen.length + inboxes[1]!.seen.length === 40 ? true : undefined),
      5_000,
      "all 40",
    );
    const all = inboxes.flatMap((i) => i.seen.map((m) => Number(m.payload.toString()))).sort((a, b) => a - b);
    expect(all).toEqual(Array.from({ length: 40 }, (_, i) => i));
    await Promise.all(members.map((c) => c.endAsync()));
  });
});

/** `narrow` may read open.> but what `deny` lists. */
const narrowConfig = (deny: string) => `
accounts {
  APP {
    jetstream: enabled
    users: [
      { user: mqg, password: mqg }
      { user: ops, password: ops }
      { user: narrow, password: narrow, permissions: { publish: ["open.>"], subscribe: { allow: ["open.>", "_INBOX.>"], deny: ${deny} } } }
    ]
  }
}
`;

describe("a subject NATS refuses, with its clients sharing the connection", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let port: number;
  let ops: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer({ config: narrowConfig(`["open.shut"]`) });
    ops = await connect({ servers: nats.url, user: "ops", pass: "ops" });
    gw = await startGateway({
      nats: nats.url,
      config: {
        gateway_users: { APP: { user: "mqg", password: "mqg" } },
        routing: [{ username: "*", account: "APP" }],
      },
    });
    port = gw.port("mqtt");
  });
  afterAll(async () => {
    await ops?.close();
    await gw?.stop();
    await nats?.stop();
  });

  const narrow = { username: "narrow", password: Buffer.from("narrow") };
  /** SUBSCRIBE at QoS 0 to `topics`; the SUBACK's codes. */
  async function subscribe(c: RawMqtt, ...topics: string[]): Promise<number[]> {
    c.send({
      cmd: "subscribe",
      messageId: 1,
      subscriptions: topics.map((topic) => ({ topic, qos: 0 })),
    } as mqtt.Packet);
    return ((await c.next("suback")) as mqtt.ISubackPacket).granted as number[];
  }

  it("each client of the login that asks for it is refused in turn, and the granted subject beside it is shared", async () => {
    const a = await RawMqtt.connected(port, 5, { clientId: "narrow-a", ...narrow });
    expect(await subscribe(a, "open/shut", "open/door")).toEqual([0x87, 0]);
    // Connected after the refusal was told: it hears its own verdict, not a shared subscription NATS dropped.
    const b = await RawMqtt.connected(port, 5, { clientId: "narrow-b", ...narrow });
    expect(await subscribe(b, "open/shut", "open/door")).toEqual([0x87, 0]);
    ops.publish("open.door", "knock");
    await ops.flush();
    for (const c of [a, b])
      expect(((await c.next("publish")) as mqtt.IPublishPacket).payload.toString()).toEqual("knock");
    a.end();
    b.end();
  });

  it("a reload that withdraws a subject two clients share stops both, and the next client asking is refused", async () => {
    const readers = [
      await RawMqtt.connected(port, 5, { clientId: "narrow-5", ...narrow }),
      await RawMqtt.connected(port, 4, { clientId: "narrow-4", ...narrow }),
    ];
    for (const c of readers) expect(await subscribe(c, "open/hall", "open/mark")).toEqual([0, 0]);
    await nats.reload(narrowConfig(`["open.shut", "open.hall"]`));
    // NATS dropped the one SUB at the reload: what comes after is not theirs, the marker behind it is.
    ops.publish("open.hall", "after");
    ops.publish("open.mark", "mark");
    await ops.flush();
    for (const c of readers) expect(((await c.next("publish")) as mqtt.IPublishPacket).topic).toBe("open/mark");
    // A client of the same login asking now hears its own verdict.
    const late = await RawMqtt.connected(port, 5, { clientId: "narrow-late", ...narrow });
    expect(await subscribe(late, "open/hall")).toEqual([0x87]);
    for (const c of [...readers, late]) c.end();
  });

  /**
   * A persistent session (MQTT 5, expiry 600) on `withdrawn` and `kept` at QoS 1 goes away;
   * `withdraw` takes `withdrawn` from the login; a message stored on each while it is away,
   * and more after its resume: only `kept`'s reach it. Another client of the login keeps the
   * NATS connection, and with it the session's SUBs lingering for its resume.
   */
  async function withdrawnWhileAway(clientId: string, withdrawn: string, kept: string, withdraw: () => Promise<void>) {
    const login = { username: "narrow", password: "narrow" };
    const options = {
      ...login,
      protocolVersion: 5 as const,
      clientId,
      clean: false,
      properties: { sessionExpiryInterval: 600 },
    };
    const keeper = await connectMqtt(port, { ...login, protocolVersion: 4, clientId: `${clientId}-keeper` });
    const first = await connectMqtt(port, options);
    expect((await first.subscribeAsync([withdrawn, kept], { qos: 1 })).map((g) => g.qos)).toEqual([1, 1]);
    await first.endAsync();
    await withdraw();
    // Stored while it is away (the login may still publish there; once NATS is back, after a
    // restart: the gateway holds its clients' reads until then); the kept one is its marker.
    await keeper.publishAsync(withdrawn, "secret", { qos: 1 });
    await keeper.publishAsync(kept, "away", { qos: 1 });

    const { client: again, inbox } = await connectCollecting(port, options);
    expect(again.connack.sessionPresent).toBe(true);
    await keeper.publishAsync(withdrawn, "later", { qos: 1 });
    await keeper.publishAsync(kept, "last", { qos: 1 });
    // Each stored filter reads on its own consumer: a copy from the withdrawn one would have come by the last.
    await inbox.count(2);
    await keeper.publishAsync(kept, "end", { qos: 1 });
    await inbox.count(3);
    expect(inbox.seen.map((m) => `${m.topic} ${m.payload.toString()}`)).toEqual([
      `${kept} away`,
      `${kept} last`,
      `${kept} end`,
    ]);
    await again.endAsync();
    await keeper.endAsync();
  }

  it("a persistent session whose QoS 1 subject was withdrawn while it was away: the resume drops it, nothing stored on it reaches the client", async () => {
    // NATS drops the lingering SUB at the reload.
    await withdrawnWhileAway("narrow-away", "open/vault", "open/note", () =>
      nats.reload(narrowConfig(`["open.shut", "open.hall", "open.vault"]`)),
    );
  });

  it("the same when the subject is withdrawn across a nats-server restart: the SUB sent again is refused, the resume drops it", async () => {
    // The same server again (port, store), open.safe denied: nats.js sends every SUB again on reconnect.
    await withdrawnWhileAway("narrow-restart", "open/safe", "open/memo", async () => {
      const { port: natsPort, storeDir } = nats;
      await nats.stop();
      nats = await startNatsServer({
        port: natsPort,
        storeDir,
        config: narrowConfig(`["open.shut", "open.hall", "open.vault", "open.safe"]`),
      });
    });
  });
});
