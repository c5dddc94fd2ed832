// Issue 13, finding 1: the gateway's own _INBOX traffic (retained reads, stored
// deliveries, KV writes and watches, JetStream API replies) must never reach a client
// subscription, and a delivery must match the subscription that asked for it. alice may
// use dev.alice.> only; carol may subscribe dev.> and _INBOX.> but not dev.secret.> or
// dev.alice.store.secret.>; dave may use everything but $MQG.>.

import { AckPolicy, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient, bodyText, collect } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { publishesOf } from "../helpers/inbound.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const serverConfig = `
accounts {
  SYS { users: [ { user: sys, password: sys } ] }
  APP {
    jetstream: enabled
    users: [
      { user: mqg, password: mqg }
      { user: ops, password: ops }
      { user: alice, password: alice, permissions: {
          publish: ["dev.alice.>"]
          subscribe: ["dev.alice.>", "_INBOX.>"]
      } }
      { user: carol, password: carol, permissions: {
          publish: ["dev.carol.>"]
          subscribe: { allow: ["dev.>", "_INBOX.>"], deny: ["dev.secret.>", "dev.alice.store.secret.>"] }
      } }
      { user: dave, password: dave, permissions: {
          publish: { allow: [">"], deny: ["$MQG.>"] }
          subscribe: { allow: [">"], deny: ["$MQG.>"] }
      } }
    ]
  }
}
system_account: SYS
`;

const login = (user: string) => ({ username: user, password: Buffer.from(user) });

async function qos1(c: RawMqtt, topic: string, payload: string, retain = false, id = 1): Promise<number> {
  c.send({
    cmd: "publish",
    topic,
    payload: Buffer.from(payload),
    qos: 1,
    messageId: id,
    retain,
    dup: false,
  } as mqtt.Packet);
  return ((await c.next("puback")) as mqtt.IPubackPacket).reasonCode ?? 0;
}

async function subscribe(c: RawMqtt, filters: Array<{ topic: string; qos: 0 | 1 | 2 }>): Promise<number[]> {
  c.send({ cmd: "subscribe", messageId: 7, subscriptions: filters } as mqtt.Packet);
  return ((await c.next("suback")) as mqtt.ISubackPacket).granted as number[];
}

describe("the gateway's own inbox traffic never reaches client subscriptions (accounts)", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let ops: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer({ config: serverConfig });
    ops = await connect({ servers: nats.url, user: "ops", pass: "ops" });
    const jsm = await jetstreamManager(ops);
    await jsm.streams.add({ name: "DEV", subjects: ["dev.>"] });
    await jsm.consumers.add("DEV", {
      durable_name: "aq",
      ack_policy: AckPolicy.Explicit,
      filter_subject: "dev.alice.store.>",
    });
    gw = await startGateway({
      nats: nats.url,
      config: {
        gateway_users: { APP: { user: "mqg", password: "mqg" } },
        routing: [{ username: "*", account: "APP" }],
        bindings: [{ stream: "DEV", account: "APP" }],
        log: { level: "info", format: "json" },
      },
    });
  });
  afterAll(async () => {
    await ops?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("carol on _INBOX/# and dev/#, dave on #: only what their filters and permissions allow, each once", async () => {
    const port = gw.port("mqtt");
    const carol = await RawMqtt.connected(port, 5, { ...login("carol"), clientId: "carol" });
    const carolGot = publishesOf(carol);
    expect(
      await subscribe(carol, [
        { topic: "_INBOX/#", qos: 0 },
        { topic: "dev/#", qos: 0 },
      ]),
    ).toEqual([0, 0]);
    const dave = await RawMqtt.connected(port, 5, { ...login("dave"), clientId: "dave" });
    const daveGot = publishesOf(dave);
    expect(await subscribe(dave, [{ topic: "#", qos: 0 }])).toEqual([0]);
    // The same users through AMQP: carol on _INBOX.>, dave on > and reading an operator
    // queue with his own connection (its pulls land in that connection's inbox).
    const carolAmqp = await AmqpClient.open(gw.port("amqp"), { username: "carol", password: "carol" });
    const carolRx = collect(await carolAmqp.receiver({ source: { address: "_INBOX.>" }, snd_settle_mode: 1 }));
    const daveAmqp = await AmqpClient.open(gw.port("amqp"), { username: "dave", password: "dave" });
    const daveRx = collect(await daveAmqp.receiver({ source: { address: ">" }, snd_settle_mode: 1 }));
    const queueRx = collect(await daveAmqp.receiver({ source: { address: "dev.alice.store.>::aq" } }));

    // alice's work: a retained message on a subject carol may not read, a persistent
    // session (KV writes, a durable consumer), stored publishes delivered to it, and the
    // retained message read back for her subscription.
    const alicePub = await RawMqtt.connected(port, 5, { ...login("alice"), clientId: "alice-pub" });
    expect(await qos1(alicePub, "dev/alice/store/secret/r", "RETAINED-SECRET", true)).toBe(0);
    const alice = await RawMqtt.connected(port, 5, {
      ...login("alice"),
      clientId: "alice",
      clean: false,
      properties: { sessionExpiryInterval: 600 },
    });
    const aliceGot = publishesOf(alice);
    expect(await subscribe(alice, [{ topic: "dev/alice/store/secret/#", qos: 1 }])).toEqual([1]);
    await aliceGot.waitFor("dev/alice/store/secret/r");
    for (let i = 0; i < 3; i++)
      expect(await qos1(alicePub, "dev/alice/store/secret/1", `TOPSECRET-${i}`, false, i + 2)).toBe(0);
    for (let i = 0; i < 3; i++) {
      const want = `TOPSECRET-${i}`;
      await expect
        .poll(() => aliceGot.got.filter((p) => p.qos === 1 && String(p.payload) === want).length, { timeout: 10_000 })
        .toBe(1);
    }
    alice.end();
    alicePub.end();

    // A barrier: what nats-server routed before these reached carol's and dave's connections first.
    ops.publish("_INBOX.marker", "m");
    ops.publish("dev.public.marker", "m");
    await carolGot.waitFor("_INBOX/marker");
    await carolGot.waitFor("dev/public/marker");
    await daveGot.waitFor("dev/public/marker");
    await expect.poll(() => carolRx.seen.some((r) => r.message.to === "_INBOX.marker"), { timeout: 10_000 }).toBe(true);
    await expect
      .poll(() => daveRx.seen.some((r) => r.message.to === "dev.public.marker"), { timeout: 10_000 })
      .toBe(true);
    expect((await queueRx.take(4)).map((r) => bodyText(r.message)).sort()).toEqual([
      "RETAINED-SECRET",
      "TOPSECRET-0",
      "TOPSECRET-1",
      "TOPSECRET-2",
    ]);

    expect(carolGot.topics().sort()).toEqual(["_INBOX/marker", "dev/public/marker"]);
    const daveTopics = daveGot.topics();
    expect(daveTopics.filter((t) => t.startsWith("$") || t.startsWith("_INBOX"))).toEqual(["_INBOX/marker"]);
    // The live core copy of each stored publish, once; no second copy from the gateway's pulls.
    expect(
      daveGot
        .payloads()
        .filter((p) => p.startsWith("TOPSECRET"))
        .sort(),
    ).toEqual(["TOPSECRET-0", "TOPSECRET-1", "TOPSECRET-2"]);
    expect(daveGot.payloads().filter((p) => p === "RETAINED-SECRET")).toHaveLength(1);
    expect(carolRx.seen.map((r) => r.message.to)).toEqual(["_INBOX.marker"]);
    const daveSubjects = daveRx.seen.map((r) => String(r.message.to));
    expect(daveSubjects.filter((t) => t.startsWith("$MQG") || t.startsWith("_INBOX"))).toEqual(["_INBOX.marker"]);
    expect(
      daveRx.seen
        .map((r) => bodyText(r.message))
        .filter((b) => b.startsWith("TOPSECRET"))
        .sort(),
    ).toEqual(["TOPSECRET-0", "TOPSECRET-1", "TOPSECRET-2"]);
    carol.end();
    dave.end();
    await carolAmqp.close();
    await daveAmqp.close();
  });
});
