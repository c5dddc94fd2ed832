// Issue 22, item 7: revocation for every reader. dave reads a core subject, a stored
// subject and a queue through each door (MQTT 5, MQTT 3.1.1, AMQP); a nats-server reload
// withdraws his subscribe permission on all three, and each of his readers stops within
// 2 s: the AMQP links are detached amqp:unauthorized-access, the MQTT subscriptions are
// closed by the gateway (MQTT has no packet for that; docs/decisions/trust-model.md,
// "Revocation"). An AMQP receiver of a stored address used to go on reading, since the
// JetStream API reads a stream whatever the subject: it now holds its read grant where
// NATS judges it (src/actors/client/readGrant.ts). An MQTT client has no operator queue:
// its queue reader is a shared subscription (a NATS queue group).
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import type { Receiver } from "rhea";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient, bodyText, collect, detached } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { publishesOf } from "../helpers/inbound.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const DAVE_READS = `["core.>", "orders.>", "q.>", "keep.>", "_INBOX.>"]`;
const DAVE_KEEPS = `["keep.>", "_INBOX.>"]`;
const users = (subscribe: string) => `
authorization { users: [
  { user: gw, password: gw }
  { user: ops, password: ops }
  { user: dave, password: dave, permissions: { publish: ["$JS.API.>", "_INBOX.>"], subscribe: ${subscribe} } }
] }
`;
/** Every reader stops within this of the reload's end (the bound). */
const STOPS_WITHIN_MS = 2_000;
const dave = (clientId: string) => ({ clientId, username: "dave", password: Buffer.from("dave") });

describe("revocation for every reader (issue 22, item 7)", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let ops: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer({ config: users(DAVE_READS) });
    ops = await connect({ servers: nats.url, user: "ops", pass: "ops" });
    const jsm = await jetstreamManager(ops);
    await jsm.streams.add({ name: "ORDERS", subjects: ["orders.>"] });
    await jsm.streams.add({ name: "QS", subjects: ["q.>"] });
    await jsm.streams.add({ name: "WILD", subjects: ["wild.>"] });
    // The operator's queue for dave's AMQP reader: a pull consumer inside its address.
    await jsm.consumers.add("QS", { durable_name: "WORK", ack_policy: AckPolicy.Explicit, filter_subject: "q.amqp.>" });
    gw = await startGateway({
      nats: nats.url,
      config: {
        gateway_users: { APP: { user: "gw", password: "gw" } },
        routing: [{ username: "*", account: "APP" }],
        bindings: [
          { stream: "ORDERS", account: "APP" },
          { stream: "QS", account: "APP" },
          { stream: "WILD", account: "APP" },
        ],
        log: { level: "info", format: "json" },
      },
    });
  });
  afterAll(async () => {
    await ops?.close();
    await gw?.stop();
    await nats?.stop();
  });

  const subscriptionsOf = async (clientId: string) => {
    const page = (await (
      await fetch(`http://127.0.0.1:${gw.port("http")}/clients?client_id=${encodeURIComponent(clientId)}`)
    ).json()) as { clients: Array<{ subscriptions: number }> };
    return page.clients[0]?.subscriptions ?? -1;
  };

  it("MQTT 5, MQTT 3.1.1 and AMQP readers of a core subject, a stored subject and a queue each stop within 2 s of the reload", async () => {
    const js = jetstream(ops);
    const stored = headers();
    stored.set("Mqgw-QoS", "1");

    // -- MQTT: a core, a stored and a shared (queue group) subscription, and one that stays.
    const mqttReaders = await Promise.all(
      ([5, 4] as const).map(async (v) => {
        const c = await RawMqtt.connected(gw.port("mqtt"), v, {
          ...dave(`dave-${v}`),
          clean: false,
          ...(v === 5 ? { properties: { sessionExpiryInterval: 300 } } : {}),
        });
        const got = publishesOf(c);
        c.send({
          cmd: "subscribe",
          messageId: 1,
          subscriptions: [
            { topic: `core/mqtt${v}`, qos: 0 },
            { topic: `orders/mqtt${v}`, qos: 1 },
            { topic: `$share/g/q/mqtt${v}`, qos: 0 },
            { topic: `keep/mqtt${v}`, qos: 0 },
          ],
        } as mqtt.Packet);
        expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0, 1, 0, 0]);
        return { v, c, got };
      }),
    );

    // -- AMQP: a presettled core receiver, an unsettled one on a stored address, the operator's queue.
    const amqp = await AmqpClient.open(gw.port("amqp"), { username: "dave", password: "dave" });
    const links: Array<{ what: string; rx: Receiver; got: ReturnType<typeof collect> }> = [];
    for (const [what, options] of [
      ["core", { source: { address: "core.amqp" }, snd_settle_mode: 1 }],
      ["stored", { source: { address: "orders.amqp" } }],
      ["queue", { source: { address: "q.amqp.>::WORK" } }],
    ] as const) {
      const rx = await amqp.receiver(options);
      links.push({ what, rx, got: collect(rx) });
    }

    const publishAll = async (tag: string) => {
      for (const v of [5, 4]) {
        ops.publish(`core.mqtt${v}`, tag);
        await js.publish(`orders.mqtt${v}`, tag, { headers: stored });
        ops.publish(`q.mqtt${v}`, tag);
      }
      ops.publish("core.amqp", tag);
      await js.publish("orders.amqp", tag, { headers: stored });
      await js.publish("q.amqp.x", tag);
    };

    // Before: every reader reads.
    await publishAll("before");
    for (const { v, got } of mqttReaders) {
      for (const topic of [`core/mqtt${v}`, `orders/mqtt${v}`, `q/mqtt${v}`]) await got.waitFor(topic);
    }
    for (const { what, got } of links) expect(bodyText((await got.next()).message), what).toBe("before");
    for (const { v } of mqttReaders) expect(await subscriptionsOf(`dave-${v}`)).toBe(4);

    // The reload withdraws core.>, orders.> and q.>.
    const detaches = links.map(({ what, rx }) =>
      detached(rx, "receiver", 15_000).then((error) => ({ what, error, at: Date.now() })),
    );
    await nats.reload(users(DAVE_KEEPS));
    const reloaded = Date.now();

    // AMQP: each link detached amqp:unauthorized-access within the bound.
    for (const d of await Promise.all(detaches)) {
      expect(d.error.condition, d.what).toBe("amqp:unauthorized-access");
      expect(d.at - reloaded, `${d.what} link detached after the reload`).toBeLessThanOrEqual(STOPS_WITHIN_MS);
    }
    // MQTT: the session closed the three subscriptions NATS removed, within the bound.
    for (const { v } of mqttReaders) {
      await eventually(
        async () => ((await subscriptionsOf(`dave-${v}`)) === 1 ? true : undefined),
        STOPS_WITHIN_MS - (Date.now() - reloaded),
        `dave-${v}'s three revoked subscriptions closed within ${STOPS_WITHIN_MS} ms of the reload`,
      );
    }

    // After: nothing published on a revoked subject reaches anyone; the kept one still does.
    await publishAll("after");
    for (const { v, got } of mqttReaders) {
      ops.publish(`keep.mqtt${v}`, "marker");
      await got.waitFor(`keep/mqtt${v}`);
      expect(got.payloads(), `MQTT ${v}`).toEqual(["before", "before", "before", "marker"]);
    }
    for (const { what, got } of links) expect(await got.none(500), what).toBe(true);
    // The stored messages are still in their streams, for readers that may read them.
    const orders = await (await jetstreamManager(ops)).streams.info("ORDERS");
    expect(orders.state.messages).toBe(6);
    for (const { c } of mqttReaders) c.end();
    await amqp.close();
  });

  it("once withdrawn, an AMQP attach to a stored address or a queue is refused amqp:unauthorized-access, no consumer made", async () => {
    const jsm = await jetstreamManager(ops);
    const consumersBefore = (await jsm.streams.info("ORDERS")).state.consumer_count;
    const amqp = await AmqpClient.open(gw.port("amqp"), { username: "dave", password: "dave" });
    for (const address of ["orders.amqp", "q.amqp.>::WORK"]) {
      expect(await amqp.refused("receiver", { source: { address } }), address).toMatchObject({
        condition: "amqp:unauthorized-access",
      });
    }
    expect((await jsm.streams.info("ORDERS")).state.consumer_count).toBe(consumersBefore);
    await amqp.close();
  });

  it("a deny list grown under a granted wildcard: an AMQP link read from a stream stops getting the denied subjects, the rest flows", async () => {
    await nats.reload(users(`{ allow: ["wild.>", "_INBOX.>"] }`));
    const js = jetstream(ops);
    const amqp = await AmqpClient.open(gw.port("amqp"), { username: "dave", password: "dave" });
    const rx = await amqp.receiver({ source: { address: "wild.>" } });
    const got = collect(rx);
    await js.publish("wild.secret.a", "before");
    expect(bodyText((await got.next()).message)).toBe("before");
    let detach: unknown;
    rx.once("receiver_close", () => {
      detach = rx.error ?? "closed";
    });
    // NATS keeps the wildcard subscription (so the grant stands) and filters on delivery,
    // telling nobody: the link pulls on dave's own connection, and the MSG line of a
    // JetStream message names its stored subject, so the filter applies to it too.
    await nats.reload(users(`{ allow: ["wild.>", "_INBOX.>"], deny: ["wild.secret.>"] }`));
    await js.publish("wild.secret.b", "denied");
    await js.publish("wild.ok", "marker");
    const next = await got.next();
    expect(bodyText(next.message)).toBe("marker");
    expect(next.message.to).toBe("wild.ok");
    expect(await got.none(500)).toBe(true);
    expect(detach).toBeUndefined();
    await amqp.close();
  });
});
