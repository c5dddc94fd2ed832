// Issue 26, item 3 with rhea: receivers that filter (filtex properties and
// application-properties filters, a JMS selector) on an operator queue and on a stored
// address. Only matching messages arrive; the rest stay for other receivers; a selector
// past its bound or that does not parse is refused at attach, saying which part. And a
// rejected outcome's error reaches JetStream's terminated advisory.
import { AckPolicy, type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { nextMsg } from "../helpers/natsMessages.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { AmqpClient, bodyText, collect, rhea, send } from "./rheaClient.js";

let n = 0;
const unique = (prefix: string) => `${prefix}.${process.pid}x${++n}`;
const t = rhea.types as unknown as {
  wrap_described(v: unknown, d: number | string): unknown;
  wrap_symbolic_map(m: Record<string, unknown>): unknown;
};
const appFilter = (props: Record<string, unknown>) => ({ app: t.wrap_described(props, 0x174) });
const selector = (sql: string) => rhea.filter.selector(sql);

describe("AMQP receivers that filter", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let amqp: AmqpClient;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "FILT", subjects: ["filt.>"] });
    gw = await startGateway({ nats: nats.url, config: { bindings: [{ stream: "FILT" }] } });
    amqp = await AmqpClient.open(gw.port("amqp"), { container_id: "filters-test" });
  });
  afterAll(async () => {
    await amqp?.close();
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  /** Publishes from NATS, each message with a color (as MQTT or AMQP senders would carry it). */
  async function publish(subject: string, colors: string[]): Promise<void> {
    for (const [i, color] of colors.entries()) {
      const h = headers();
      h.set("Mqgw-Prop-color", color);
      h.set("Mqgw-Prop-n", String(i));
      await nc.publish(subject, `${color} ${i}`, { headers: h });
    }
    await nc.flush();
  }

  async function queue(name: string, subject: string): Promise<void> {
    await jsm.consumers.add("FILT", { durable_name: name, ack_policy: AckPolicy.Explicit, filter_subject: subject });
  }

  const settledQueue = (name: string) =>
    eventually(
      async () => {
        const info = await jsm.consumers.info("FILT", name);
        return info.num_ack_pending === 0 && info.num_pending === 0 ? info : undefined;
      },
      10_000,
      `queue ${name} empty`,
    );

  it("operator queue: two filtered receivers share it, each gets only its own; the filters are echoed", async () => {
    const subject = unique("filt.q");
    await queue("shared", subject);
    const red = await amqp.receiver({ source: { address: `${subject}::shared`, filter: appFilter({ color: "red" }) } });
    const blue = await amqp.receiver({ source: { address: `${subject}::shared`, filter: selector("color = 'blue'") } });
    expect(Object.keys((red.source as { filter?: object }).filter ?? {})).toEqual(["app"]);
    expect(Object.keys((blue.source as { filter?: object }).filter ?? {})).toEqual(["jms-selector"]);
    const redGot = collect(red);
    const blueGot = collect(blue);
    await publish(subject, ["red", "blue", "red", "blue", "blue", "red"]);
    // A message one link passes over comes back to the queue's next pull after a jittered
    // delay (jsFeed.ts passDelayMs): on average two passes, so the wait is generous.
    const reds = await redGot.take(3, 20_000);
    const blues = await blueGot.take(3, 20_000);
    expect(reds.map((m) => bodyText(m.message)).sort()).toEqual(["red 0", "red 2", "red 5"]);
    expect(blues.map((m) => bodyText(m.message)).sort()).toEqual(["blue 1", "blue 3", "blue 4"]);
    expect(await redGot.none(300)).toBe(true);
    await settledQueue("shared");
    red.close();
    blue.close();
  }, 60_000);

  it("operator queue: what no filter matches stays for a receiver that attaches later", async () => {
    const subject = unique("filt.q");
    await queue("later", subject);
    const red = await amqp.receiver({ source: { address: `${subject}::later`, filter: appFilter({ color: "red" }) } });
    const got = collect(red);
    await publish(subject, ["green", "red", "green"]);
    expect(bodyText((await got.next()).message)).toBe("red 1");
    expect(await got.none(300)).toBe(true);
    const info = await jsm.consumers.info("FILT", "later");
    expect(info.num_ack_pending + info.num_pending).toBe(2);
    red.close();
    const any = await amqp.receiver(`${subject}::later`);
    const rest = await collect(any).take(2);
    expect(rest.map((m) => bodyText(m.message)).sort()).toEqual(["green 0", "green 2"]);
    await settledQueue("later");
    any.close();
  });

  it("stored address: each receiver's consumer sees only what its filter passes; an unfiltered one sees all", async () => {
    const subject = unique("filt.addr");
    // From NATS (or MQTT) every property is text (mapping-to-nats.md): compared as text, not as numbers.
    const big = await amqp.receiver({
      source: { address: subject, filter: selector("n IN ('2', '3', '4') AND color <> 'red'") },
    });
    const red = await amqp.receiver({ source: { address: subject, filter: appFilter({ color: "&p:re" }) } });
    const all = await amqp.receiver(subject);
    const [bigGot, redGot, allGot] = [collect(big), collect(red), collect(all)];
    await publish(subject, ["red", "blue", "green", "red", "blue"]);
    expect((await bigGot.take(2)).map((m) => bodyText(m.message))).toEqual(["green 2", "blue 4"]);
    expect((await redGot.take(2)).map((m) => bodyText(m.message))).toEqual(["red 0", "red 3"]);
    expect(await allGot.take(5)).toHaveLength(5);
    expect(await bigGot.none(300)).toBe(true);
    for (const l of [big, red, all]) l.close();
  });

  it("properties filter on an AMQP sender's subject (prefix), with its typed application properties; amqp:sql-filter alike", async () => {
    const subject = unique("filt.props");
    const props = { props: t.wrap_described(t.wrap_symbolic_map({ subject: "&p:order." }), 0x173) };
    const r = await amqp.receiver({ source: { address: subject, filter: { ...props, ...selector("qty > 2") } } });
    const got = collect(r);
    // The same with RabbitMQ's amqp:sql-filter (filtex SQL: p. and a. name the sections).
    const sql = { sql: t.wrap_described("p.subject LIKE 'order.%' AND a.qty > 2", 0x120) };
    const viaSql = await amqp.receiver({ source: { address: subject, filter: sql } });
    expect(Object.keys((viaSql.source as { filter?: object }).filter ?? {})).toEqual(["sql"]);
    const sqlGot = collect(viaSql);
    const s = await amqp.sender(subject);
    for (const [subj, qty] of [
      ["order.created", 5],
      ["invoice.sent", 9],
      ["order.paid", 1],
      ["order.shipped", 3],
    ] as const)
      expect(await send(s, { subject: subj, application_properties: { qty }, body: `${subj}` })).toEqual({
        state: "accepted",
      });
    expect((await got.take(2)).map((m) => m.message.subject)).toEqual(["order.created", "order.shipped"]);
    expect((await sqlGot.take(2)).map((m) => m.message.subject)).toEqual(["order.created", "order.shipped"]);
    expect(await got.none(300)).toBe(true);
    expect(await sqlGot.none(100)).toBe(true);
    r.close();
    viaSql.close();
    s.close();
  });

  it("refuses at attach a selector past its bound or that does not parse, saying which part", async () => {
    const subject = unique("filt.bad");
    const wide = Array.from({ length: 200 }, (_, i) => `k = ${i}`).join(" OR ");
    expect(await amqp.refused("receiver", { source: { address: subject, filter: selector(wide) } })).toMatchObject({
      condition: "amqp:invalid-field",
      description: expect.stringMatching(/jms-selector: .*more than 256 terms/),
    });
    const deep = `${"(".repeat(40)}a = 1${")".repeat(40)}`;
    expect(await amqp.refused("receiver", { source: { address: subject, filter: selector(deep) } })).toMatchObject({
      condition: "amqp:invalid-field",
      description: expect.stringMatching(/nests deeper than 32/),
    });
    const like = `a LIKE '${"%a".repeat(200)}'`;
    expect(await amqp.refused("receiver", { source: { address: subject, filter: selector(like) } })).toMatchObject({
      description: expect.stringMatching(/LIKE pattern .* longer than 256/),
    });
    expect(
      await amqp.refused("receiver", { source: { address: subject, filter: selector("color = ") } }),
    ).toMatchObject({ condition: "amqp:invalid-field", description: expect.stringMatching(/unexpected end/) });
    // Checked before the queue is looked up: no consumer is read for a refused filter.
    expect(
      await amqp.refused("receiver", { source: { address: `${subject}::none`, filter: appFilter({ a: "&x" }) } }),
    ).toMatchObject({ condition: "amqp:invalid-field", description: expect.stringMatching(/&p:, &s: or &&/) });
    // The same selector on one line is fine when it is within the bound.
    const ok = await amqp.receiver({ source: { address: subject, filter: selector("k IN (1, 2, 3)") } });
    ok.close();
  });

  it("rejected with an error: terminated, the client's condition and description the advisory's reason", async () => {
    const subject = unique("filt.q");
    await queue("rejects", subject);
    const advisory = nextMsg(nc, "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.FILT.rejects");
    await nc.flush();
    const r = await amqp.receiver({ source: `${subject}::rejects`, autoaccept: false });
    const got = collect(r);
    await publish(subject, ["red"]);
    (await got.next()).delivery.reject({ condition: "app:bad-order", description: "no such\ncustomer" });
    expect((await advisory).json()).toMatchObject({ reason: "app:bad-order: no such customer" });
    expect(await got.none(300)).toBe(true);
    await settledQueue("rejects");
    r.close();
  });
});
