// Issue 4, items 3 and 4 on stored subjects: JetStream-acknowledged sends, operator
// queues (the "Done when" scenario), gateway-made consumers for stored sources, and
// dispositions mapped onto ack / term / nak.
import { AckPolicy, type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { AmqpClient, bodyText, collect, detached, rhea, send, sendSettled } from "./rheaClient.js";

let n = 0;
const unique = (prefix: string) => `${prefix}.${process.pid}x${++n}`;

describe("AMQP on stored subjects", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let amqp: AmqpClient;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    // Bindings are read at start: the operator's streams exist first.
    await jsm.streams.add({ name: "ORDERS", subjects: ["js.orders.>"] });
    await jsm.streams.add({ name: "OTHER", subjects: ["js.other.>"] });
    await jsm.streams.add({ name: "GONE", subjects: ["js.gone.>"] });
    gw = await startGateway({
      nats: nats.url,
      config: { bindings: [{ stream: "ORDERS" }, { stream: "OTHER" }, { stream: "GONE" }] },
    });
    amqp = await AmqpClient.open(gw.port("amqp"), { container_id: "js-test" });
  });
  afterAll(async () => {
    await amqp?.close();
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  async function queue(name: string, config: Record<string, unknown>): Promise<void> {
    await jsm.consumers.add("ORDERS", { durable_name: name, ack_policy: AckPolicy.Explicit, ...config });
  }

  describe("sends", () => {
    it("an unsettled send to a stored subject is accepted after the stream's ack; a reused message-id is stored again", async () => {
      const subject = unique("js.orders.send");
      const sender = await amqp.sender(subject);
      const message = { body: rhea.message.data_section(Buffer.from("stored")), message_id: `id-${subject}` };
      expect(await send(sender, message)).toEqual({ state: "accepted" });
      // Applications reuse message-ids: without amqp.dedupe_message_id every accepted transfer is kept.
      expect(await send(sender, message)).toEqual({ state: "accepted" });
      const info = await jsm.streams.info("ORDERS", { subjects_filter: subject });
      expect(info.state.subjects?.[subject]).toBe(2);
      const stored = (await jsm.streams.getMessage("ORDERS", { last_by_subj: subject }))!;
      expect(stored.string()).toBe("stored");
      expect(stored.header.get("Nats-Msg-Id")).not.toContain(`id-${subject}`);
      expect(stored.header.get("Mqgw-Amqp-Message-Id")).toBe(`id-${subject}`);
      expect(stored.header.get("Mqgw-QoS")).toBe("1");
      sender.close();
    });

    it("a presettled send to a stored subject is stored too, without Mqgw-QoS", async () => {
      const subject = unique("js.orders.presettled");
      const sender = await amqp.sender({ target: { address: subject }, snd_settle_mode: 1 });
      await sendSettled(sender, { body: rhea.message.data_section(Buffer.from("settled")) });
      const stored = await eventually(
        () =>
          jsm.streams.getMessage("ORDERS", { last_by_subj: subject }).then(
            (m) => m ?? undefined,
            () => undefined,
          ),
        5_000,
        "stored",
      );
      expect(stored.string()).toBe("settled");
      expect(stored.header?.has("Mqgw-QoS") ?? false).toBe(false);
      sender.close();
    });

    it("a stored publish JetStream does not acknowledge is rejected with amqp:internal-error", async () => {
      await jsm.streams.delete("GONE");
      const sender = await amqp.sender(unique("js.gone.x"));
      const outcome = await send(sender, { body: "nowhere to store" });
      expect(outcome).toMatchObject({ state: "rejected", error: { condition: "amqp:internal-error" } });
      sender.close();
    });
  });

  describe("operator queues <address>::<queue>", () => {
    it("done when: a receiver settles half its messages and detaches; the other half comes back on the next attach", async () => {
      await queue("billing", { filter_subject: "js.orders.eu" });
      for (let i = 0; i < 6; i++) nc.publish("js.orders.eu", `order ${i}`);
      await nc.flush();

      const first = await amqp.receiver({ source: "js.orders.eu::billing", credit_window: 0, autoaccept: false });
      const firstBatch = collect(first);
      first.add_credit(6);
      const six = await firstBatch.take(6);
      expect(six.map((m) => bodyText(m.message))).toEqual([0, 1, 2, 3, 4, 5].map((i) => `order ${i}`));
      for (const m of six.slice(0, 3)) m.delivery.accept();
      first.close();
      await detached(first, "receiver");

      const second = await amqp.receiver({ source: "js.orders.eu::billing", credit_window: 0, autoaccept: false });
      const secondBatch = collect(second);
      second.add_credit(10);
      const rest = await secondBatch.take(3);
      // Redelivered messages keep no order among themselves.
      expect(rest.map((m) => bodyText(m.message)).sort()).toEqual(["order 3", "order 4", "order 5"]);
      // Redelivered: the header says so.
      expect(rest.map((m) => m.message.delivery_count)).toEqual([1, 1, 1]);
      expect(rest[0]!.message.first_acquirer).toBe(false);
      expect(await secondBatch.none(300)).toBe(true);
      for (const m of rest) m.delivery.accept();
      await eventually(
        async () => {
          const info = await jsm.consumers.info("ORDERS", "billing");
          return info.num_ack_pending === 0 && info.num_pending === 0 ? info : undefined;
        },
        5_000,
        "everything acknowledged",
      );
      second.close();
    });

    it("credit is honoured on the stream too: credit 1 pulls exactly one message", async () => {
      await queue("one-at-a-time", { filter_subject: "js.orders.credit" });
      for (let i = 0; i < 3; i++) nc.publish("js.orders.credit", `c${i}`);
      await nc.flush();
      const r = await amqp.receiver({ source: "js.orders.credit::one-at-a-time", credit_window: 0, autoaccept: false });
      const got = collect(r);
      r.add_credit(1);
      const m = await got.next();
      expect(bodyText(m.message)).toBe("c0");
      expect(await got.none(300)).toBe(true);
      const info = await jsm.consumers.info("ORDERS", "one-at-a-time");
      expect(info.num_ack_pending).toBe(1);
      expect(info.num_pending).toBe(2);
      m.delivery.accept();
      r.close();
    });

    it("drain on a queue: what is there comes, the rest of the credit comes back drained at once", async () => {
      await queue("drained", { filter_subject: "js.orders.drain" });
      nc.publish("js.orders.drain", "the only one");
      await nc.flush();
      const r = await amqp.receiver({ source: "js.orders.drain::drained", credit_window: 0, autoaccept: true });
      const got = collect(r);
      const drained = new Promise<void>((resolve) => r.once("receiver_drained", () => resolve()));
      r.add_credit(5);
      r.drain_credit();
      await drained;
      expect(got.seen.map((m) => bodyText(m.message))).toEqual(["the only one"]);
      expect((r as unknown as { credit: number }).credit).toBe(0);
      r.close();
    });

    it("dispositions: rejected terminates, released and modified(delivery-failed) redeliver with delivery-count", async () => {
      await queue("dispositions", { filter_subject: "js.orders.disp" });
      for (const body of ["reject me", "release me", "fail me"]) nc.publish("js.orders.disp", body);
      await nc.flush();
      const r = await amqp.receiver({ source: "js.orders.disp::dispositions", credit_window: 0, autoaccept: false });
      const got = collect(r);
      r.add_credit(3);
      const [rej, rel, fail] = await got.take(3);
      // One disposition frame each: rhea (the client) would merge adjacent ones into the first's outcome.
      const tick = () => new Promise((r) => setImmediate(r));
      rej!.delivery.reject({ condition: "amqp:internal-error", description: "no" });
      await tick();
      rel!.delivery.release();
      await tick();
      fail!.delivery.modified({ delivery_failed: true });
      r.add_credit(3);
      const again = await got.take(2);
      expect(again.map((m) => bodyText(m.message)).sort()).toEqual(["fail me", "release me"]);
      expect(again.every((m) => m.message.delivery_count === 1)).toBe(true);
      for (const m of again) m.delivery.accept();
      expect(await got.none(300)).toBe(true);
      await eventually(
        async () => {
          const info = await jsm.consumers.info("ORDERS", "dispositions");
          return info.num_ack_pending === 0 ? info : undefined;
        },
        5_000,
        "all settled",
      );
      r.close();
    });

    it("refuses a queue that does not exist (not-found) or on an unstored address (not-found)", async () => {
      expect(await amqp.refused("receiver", "js.orders.eu::nobody")).toMatchObject({ condition: "amqp:not-found" });
      expect(await amqp.refused("receiver", "unstored.x::billing")).toMatchObject({ condition: "amqp:not-found" });
    });

    it("refuses a push consumer or one without explicit acks (not-implemented)", async () => {
      await jsm.consumers.add("ORDERS", {
        durable_name: "pushy",
        ack_policy: AckPolicy.Explicit,
        deliver_subject: "push.here",
        filter_subject: "js.orders.p",
      });
      await jsm.consumers.add("ORDERS", {
        durable_name: "no-acks",
        ack_policy: AckPolicy.None,
        filter_subject: "js.orders.p",
      });
      expect(await amqp.refused("receiver", "js.orders.p::pushy")).toMatchObject({ condition: "amqp:not-implemented" });
      expect(await amqp.refused("receiver", "js.orders.p::no-acks")).toMatchObject({
        condition: "amqp:not-implemented",
      });
    });

    it("refuses a queue with max_bytes or with filters outside the address (precondition-failed)", async () => {
      await queue("bytes", { filter_subject: "js.orders.b", max_bytes: 1024 });
      await queue("wide", { filter_subject: "js.orders.>" });
      await queue("elsewhere", { filter_subject: "js.orders.f" });
      expect(await amqp.refused("receiver", "js.orders.b::bytes")).toMatchObject({
        condition: "amqp:precondition-failed",
      });
      expect(await amqp.refused("receiver", "js.orders.w::wide")).toMatchObject({
        condition: "amqp:precondition-failed",
      });
      expect(await amqp.refused("receiver", "js.orders.g::elsewhere")).toMatchObject({
        condition: "amqp:precondition-failed",
      });
      // A wildcard address that holds the queue's filter is fine.
      const ok = await amqp.receiver("js.orders.*::elsewhere");
      ok.close();
    });
  });

  describe("unsettled receivers on stored sources", () => {
    it("an exact stored address is read from the stream: a released message comes back", async () => {
      const subject = unique("js.orders.live");
      const r = await amqp.receiver({
        source: { address: subject },
        snd_settle_mode: 0,
        credit_window: 0,
        autoaccept: false,
      });
      const got = collect(r);
      r.add_credit(5);
      await nc.flush();
      nc.publish(subject, "from the stream");
      const first = await got.next();
      expect(first.delivery.remote_settled).toBe(false);
      first.delivery.release();
      const again = await got.next();
      expect(bodyText(again.message)).toBe("from the stream");
      expect(again.message.delivery_count).toBe(1);
      again.delivery.accept();
      r.close();
    });

    it("a wildcard source inside one stream is served unsettled; one spanning streams is refused (not-implemented)", async () => {
      const base = unique("js.orders.wild");
      const r = await amqp.receiver({ source: { address: `${base}.*` }, snd_settle_mode: 0 });
      const got = collect(r);
      await nc.flush();
      nc.publish(`${base}.a`, "inside");
      const m = await got.next();
      expect(m.delivery.remote_settled).toBe(false);
      expect(bodyText(m.message)).toBe("inside");
      r.close();
      expect(await amqp.refused("receiver", { source: { address: "js.>" }, snd_settle_mode: 0 })).toMatchObject({
        condition: "amqp:not-implemented",
      });
      expect(await amqp.refused("receiver", { source: { address: "js.*.eu" }, snd_settle_mode: 0 })).toMatchObject({
        condition: "amqp:not-implemented",
      });
      // Presettled is always allowed.
      const settled = await amqp.receiver({ source: { address: "js.>" }, snd_settle_mode: 1 });
      settled.close();
    });

    it("the gateway's consumer goes with the link", async () => {
      const subject = unique("js.other.gone");
      const before = (await jsm.consumers.list("OTHER").next()).length;
      const r = await amqp.receiver({ source: { address: subject }, snd_settle_mode: 0 });
      expect((await jsm.consumers.list("OTHER").next()).length).toBe(before + 1);
      r.close();
      await detached(r, "receiver");
      await eventually(
        async () => ((await jsm.consumers.list("OTHER").next()).length === before ? true : undefined),
        5_000,
        "consumer deleted",
      );
    });
  });

  it("logged no errors along the way", () => {
    expect(gw.logs.filter((l) => Number(l.level) >= 50)).toEqual([]);
  });
});
