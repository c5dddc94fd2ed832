// A durable subscription (JMS durable subscriber, Qpid Proton DurableSubscription): a
// source with durable unsettled-state and expiry-policy never, on a stored address, is a
// named JetStream consumer kept while the client is away; a detach with closed=true ends
// it. Elsewhere it is refused amqp:not-implemented. docs/decisions/amqp-durable.md. With a
// selector, the subscription keeps only what it selects, and another selector makes a new one.
import { type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import type { Receiver } from "rhea";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { AmqpClient, bodyText, collect, rhea } from "./rheaClient.js";

const natsHeaders = (pairs: Record<string, string>) => {
  const h = headers();
  for (const [k, v] of Object.entries(pairs)) h.set(k, v);
  return h;
};

const DURABLE = { durable: 2, expiry_policy: "never" } as const;

/** Detaches without ending the terminus (closed=false), as JMS does when a durable subscriber closes. */
function detachKeeping(r: Receiver): Promise<void> {
  return new Promise((resolve) => {
    r.once("receiver_close", () => resolve());
    r.detach();
  });
}

function closeEnding(r: Receiver): Promise<void> {
  return new Promise((resolve) => {
    r.once("receiver_close", () => resolve());
    r.close();
  });
}

describe("AMQP durable subscriptions", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "DUR", subjects: ["dur.>"] });
    gw = await startGateway({ nats: nats.url, config: { bindings: [{ stream: "DUR" }] } });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  const consumers = async () => {
    const names: string[] = [];
    for await (const c of jsm.consumers.list("DUR")) names.push(c.name);
    return names;
  };

  it("keeps what was published while the subscriber was away, and ends with a closed detach", async () => {
    const js = jetstream(nc);
    const open = async () => {
      const c = await AmqpClient.open(gw.port("amqp"), { container_id: "jms-client-1" });
      const r = await c.receiver({ name: "orders-sub", source: { address: "dur.orders.*", ...DURABLE } });
      return { c, r };
    };
    const first = await open();
    // The gateway's answer says it keeps the terminus.
    expect(first.r.source).toMatchObject({ address: "dur.orders.*", durable: 2, expiry_policy: "never" });
    const got = collect(first.r);
    await js.publish("dur.orders.eu", "one");
    expect(bodyText((await got.next()).message)).toBe("one");
    await detachKeeping(first.r);
    await first.c.close();

    // Away: these wait in the stream for the subscription.
    for (const m of ["two", "three"]) await js.publish("dur.orders.us", m);
    expect(await consumers()).toHaveLength(1);

    const second = await open();
    const again = collect(second.r);
    expect((await again.take(2)).map((m) => bodyText(m.message))).toEqual(["two", "three"]);
    await closeEnding(second.r);
    await eventually(async () => ((await consumers()).length === 0 ? true : undefined), 5_000, "unsubscribed");
    await second.c.close();
  });

  it("a JMS-style unsubscribe: an attach of the subscription's name with no source finds it, its closed detach ends it", async () => {
    const c = await AmqpClient.open(gw.port("amqp"), { container_id: "jms-client-2" });
    const r = await c.receiver({ name: "to-drop", source: { address: "dur.drop", ...DURABLE } });
    await detachKeeping(r);
    await c.close();
    expect(await consumers()).toHaveLength(1);

    const d = await AmqpClient.open(gw.port("amqp"), { container_id: "jms-client-2" });
    const lookup = await d.receiver({ name: "to-drop", source: {} });
    expect(lookup.source).toMatchObject({ address: "dur.drop", durable: 2 });
    await closeEnding(lookup);
    await eventually(async () => ((await consumers()).length === 0 ? true : undefined), 5_000, "unsubscribed");
    await d.close();
  });

  it("a durable subscription on an unstored address is refused amqp:not-implemented, with the reason", async () => {
    const c = await AmqpClient.open(gw.port("amqp"), { container_id: "jms-client-3" });
    const error = await c.refused("receiver", { name: "live-sub", source: { address: "live.topic", ...DURABLE } });
    expect(error).toMatchObject({ condition: "amqp:not-implemented" });
    expect(error.description).toMatch(/durable subscription.*stored address/);
    await c.close();
  });

  it("a durable terminus that expires (any policy but never) is an ordinary source: answered durable none, gone with the link", async () => {
    const c = await AmqpClient.open(gw.port("amqp"), { container_id: "jms-client-4" });
    const r = await c.receiver({ name: "short", source: { address: "dur.short", durable: 2 } });
    expect((r.source as { durable?: number }).durable ?? 0).toBe(0);
    expect(await consumers()).toHaveLength(1);
    await detachKeeping(r);
    await eventually(async () => ((await consumers()).length === 0 ? true : undefined), 5_000, "consumer deleted");
    await c.close();
  });

  it("with a selector: keeps only what it selects while away; another selector is a new subscription (JMS)", async () => {
    const js = jetstream(nc);
    const open = async (selector: string) => {
      const c = await AmqpClient.open(gw.port("amqp"), { container_id: "jms-client-3" });
      const r = await c.receiver({
        name: "priced",
        source: { address: "dur.prices", ...DURABLE, filter: rhea.filter.selector(selector) },
      });
      return { c, r };
    };
    const publish = async (what: string, price: number) =>
      js.publish("dur.prices", what, { headers: natsHeaders({ "Mqgw-Prop-size": price > 10 ? "big" : "small" }) });
    const first = await open("size = 'big'");
    await detachKeeping(first.r);
    await first.c.close();
    await publish("cheap", 1);
    await publish("dear", 99);
    const same = await open("(size = 'big')");
    const got = collect(same.r);
    expect(bodyText((await got.next()).message)).toBe("dear");
    expect(await got.none(300)).toBe(true);
    await detachKeeping(same.r);
    await same.c.close();

    await publish("after", 1);
    // Another selector: the old subscription ends, the new one starts from now.
    const other = await open("size = 'small'");
    const fresh = collect(other.r);
    expect(await fresh.none(300)).toBe(true);
    await publish("new", 2);
    expect(bodyText((await fresh.next()).message)).toBe("new");
    await closeEnding(other.r);
    await other.c.close();
    await eventually(async () => ((await consumers()).length === 0 ? true : undefined), 5_000, "unsubscribed");
  });
});
