// Issue 4, items 2, 3, 5 and 6 end to end: rhea clients on the built gateway with a real
// nats-server, NATS and MQTT clients on the same subjects.
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import type { Source } from "rhea";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, metric, startGateway } from "../helpers/gateway.js";
import { collect as collectMqtt, connectMqtt } from "../helpers/mqttClient.js";
import { nextMsg } from "../helpers/natsMessages.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { AmqpClient, bodyText, collect, rhea, send, sendSettled } from "./rheaClient.js";

/** rhea's typings want an address even for a dynamic source. */
const DYNAMIC = { dynamic: true } as unknown as Source;

let n = 0;
/** A subject of its own for each test. */
const unique = (prefix: string) => `${prefix}.${process.pid}x${++n}`;

describe("AMQP links: targets, sources, messages and routes", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let amqp: AmqpClient;

  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false });
    gw = await startGateway({
      nats: nats.url,
      config: { amqp: { listen: "127.0.0.1:0", routes: [{ subject: "orders", template: "orders.{region}" }] } },
    });
    nc = await connect({ servers: nats.url });
    amqp = await AmqpClient.open(gw.port("amqp"), { container_id: "links-test" });
  });
  afterAll(async () => {
    await amqp?.close();
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  describe("sender links (targets)", () => {
    it("publishes a data section as the raw payload, unsettled with Mqgw-QoS 1, accepted after the flush", async () => {
      const subject = unique("t.data");
      const got = nextMsg(nc, subject);
      await nc.flush();
      const sender = await amqp.sender(subject);
      const outcome = await send(sender, {
        body: rhea.message.data_section(Buffer.from("raw bytes")),
        message_id: "m-1",
        content_type: "text/plain",
        correlation_id: "corr-7",
        reply_to: "answers.here",
        subject: "JMSType",
        application_properties: { region: "eu", n: 42, flag: true },
      });
      expect(outcome).toEqual({ state: "accepted" });
      const m = await got;
      expect(m.string()).toBe("raw bytes");
      expect(m.reply).toBe("answers.here");
      const h = m.headers!;
      expect(h.get("Mqgw-QoS")).toBe("1");
      expect(h.get("Mqgw-Content-Type")).toBe("text/plain");
      expect(h.get("Mqgw-Correlation-Id")).toBe("corr-7");
      expect(h.get("Mqgw-Reply-To")).toBe("answers.here");
      expect(h.get("Mqgw-Amqp-Message-Id")).toBe("m-1");
      expect(h.get("Mqgw-Amqp-Subject")).toBe("JMSType");
      expect(h.get("Mqgw-Amqp-Container-Id")).toBe("links-test");
      expect(h.get("Mqgw-Prop-region")).toBe("eu");
      expect(h.get("Mqgw-Prop-n")).toBe("42");
      expect(h.get("Mqgw-Prop-flag")).toBe("true");
      expect(h.has("Mqgw-Amqp-Body")).toBe(false);
      expect(h.get("Mqgw-Amqp-Head")).not.toBe("");
      sender.close();
    });

    it("presettled sends carry no Mqgw-QoS (0 is no header)", async () => {
      const subject = unique("t.presettled");
      const got = nextMsg(nc, subject);
      await nc.flush();
      const sender = await amqp.sender({ target: { address: subject }, snd_settle_mode: 1 });
      await sendSettled(sender, { body: rhea.message.data_section(Buffer.from("fire and forget")) });
      const m = await got;
      expect(m.string()).toBe("fire and forget");
      expect(m.headers?.has("Mqgw-QoS") ?? false).toBe(false);
      sender.close();
    });

    it("other bodies travel AMQP-encoded with Mqgw-Amqp-Body: sections, and reach AMQP receivers unchanged", async () => {
      const subject = unique("t.value");
      const receiver = await amqp.receiver(subject);
      const messages = collect(receiver);
      const got = nextMsg(nc, subject);
      await nc.flush();
      const sender = await amqp.sender(subject);
      expect(await send(sender, { body: "hello", message_annotations: { "x-opt-k": "v" } })).toEqual({
        state: "accepted",
      });
      const m = await got;
      // mapping-to-nats.md: amqp-value "hello" is 00 53 77 a1 05 68 65 6c 6c 6f.
      expect(Buffer.from(m.data).toString("hex")).toBe("005377a10568656c6c6f");
      expect(m.headers!.get("Mqgw-Amqp-Body")).toBe("sections");
      const { message } = await messages.next();
      expect(message.body).toBe("hello");
      expect(message.message_annotations).toEqual({ "x-opt-k": "v" });
      sender.close();
      receiver.close();
    });

    it("refuses targets with wildcards, empty tokens or whitespace (invalid-field) and $MQG (unauthorized-access)", async () => {
      for (const address of ["t.*", "t.>", "t..x", "t x", ".t"]) {
        expect(await amqp.refused("sender", address)).toMatchObject({ condition: "amqp:invalid-field" });
      }
      expect(await amqp.refused("sender", "$MQG.admin.ping.list")).toMatchObject({
        condition: "amqp:unauthorized-access",
      });
      // The connection survives refused links.
      const subject = unique("t.after");
      const got = nextMsg(nc, subject);
      await nc.flush();
      expect(await send(await amqp.sender(subject), { body: "still here" })).toEqual({ state: "accepted" });
      await got;
    });

    it("anonymous relay: each message goes to its `to`, and a bad `to` is refused per message", async () => {
      const sender = await amqp.sender({ target: {} });
      const subject = unique("t.relay");
      const got = nextMsg(nc, subject);
      await nc.flush();
      expect(await send(sender, { to: subject, body: rhea.message.data_section(Buffer.from("relayed")) })).toEqual({
        state: "accepted",
      });
      expect((await got).string()).toBe("relayed");
      expect(await send(sender, { body: "no to" })).toMatchObject({
        state: "rejected",
        error: { condition: "amqp:invalid-field" },
      });
      expect(await send(sender, { to: "t.*", body: "wild" })).toMatchObject({
        state: "rejected",
        error: { condition: "amqp:invalid-field" },
      });
      expect(await send(sender, { to: "$MQG.admin.x", body: "admin" })).toMatchObject({
        state: "rejected",
        error: { condition: "amqp:unauthorized-access" },
      });
      sender.close();
    });

    it("anonymous relay, presettled: a refused message is dropped and counted", async () => {
      const before = await metric(gw, "mqgw_dropped_total", { protocol: "amqp" });
      const sender = await amqp.sender({ target: {}, snd_settle_mode: 1 });
      await sendSettled(sender, { to: "t.bad.*", body: "dropped" });
      await eventually(
        async () => ((await metric(gw, "mqgw_dropped_total", { protocol: "amqp" })) > before ? true : undefined),
        5_000,
        "a drop counted",
      );
      sender.close();
    });

    it("a dynamic target is a new inbox subject", async () => {
      const sender = await amqp.sender({ target: { dynamic: true } });
      const address = (sender.target as { address: string }).address;
      expect(address).toMatch(/^_INBOX\./);
      const got = nextMsg(nc, address);
      await nc.flush();
      expect(await send(sender, { body: rhea.message.data_section(Buffer.from("to the inbox")) })).toEqual({
        state: "accepted",
      });
      expect((await got).string()).toBe("to the inbox");
      sender.close();
    });
  });

  describe("receiver links (sources)", () => {
    it("a NATS message arrives as one data section with `to` set to the subject and the headers as properties", async () => {
      const subject = unique("s.exact");
      const receiver = await amqp.receiver(subject);
      const messages = collect(receiver);
      const h = headers();
      h.set("Mqgw-Content-Type", "application/json");
      h.set("Mqgw-Correlation-Id", "req-42");
      h.append("Mqgw-Prop-region", "eu");
      h.append("Mqgw-Prop-region", "us");
      h.set("Mqgw-Prop-with%20space", "v");
      h.set("Trace-Id", "not for AMQP");
      nc.publish(subject, '{"id":42}', { headers: h, reply: "reply.subject" });
      const { message } = await messages.next();
      expect(message.to).toBe(subject);
      expect(bodyText(message)).toBe('{"id":42}');
      expect((message.body as { typecode: number }).typecode).toBe(0x75);
      expect(message.content_type).toBe("application/json");
      expect(message.correlation_id).toBe("req-42");
      expect(message.reply_to).toBe("reply.subject");
      // Only the first value of a repeated key reaches AMQP.
      expect(message.application_properties).toEqual({ region: "eu", "with space": "v" });
      receiver.close();
    });

    it("wildcard sources: presettled or mixed are served live; explicitly unsettled needs a binding (not-implemented)", async () => {
      const base = unique("s.wild");
      const settled = await amqp.receiver({ source: { address: `${base}.*` }, snd_settle_mode: 1 });
      const mixed = await amqp.receiver({ source: { address: `${base}.>` } });
      const a = collect(settled);
      const b = collect(mixed);
      nc.publish(`${base}.one`, "1");
      expect(bodyText((await a.next()).message)).toBe("1");
      expect(bodyText((await b.next()).message)).toBe("1");
      expect((await b.seen[0]!.delivery).remote_settled).toBe(true);
      expect(await amqp.refused("receiver", { source: { address: `${base}.*` }, snd_settle_mode: 0 })).toMatchObject({
        condition: "amqp:not-implemented",
      });
      settled.close();
      mixed.close();
    });

    it("an unsettled receiver on an exact unstored address is served live", async () => {
      const subject = unique("s.unsettled");
      const receiver = await amqp.receiver({ source: { address: subject }, snd_settle_mode: 0 });
      const messages = collect(receiver);
      nc.publish(subject, "live");
      const { delivery } = await messages.next();
      expect(delivery.remote_settled).toBe(false);
      receiver.close();
    });

    it("refuses sources with empty tokens or whitespace (invalid-field) and $MQG (unauthorized-access)", async () => {
      for (const address of ["s..x", "s x", "s.>.x", ""]) {
        expect(await amqp.refused("receiver", { source: { address } })).toMatchObject({
          condition: "amqp:invalid-field",
        });
      }
      expect(await amqp.refused("receiver", "$MQG.>")).toMatchObject({ condition: "amqp:unauthorized-access" });
    });

    it("a `>` source never delivers $MQG subjects", async () => {
      const receiver = await amqp.receiver({ source: { address: ">" }, snd_settle_mode: 1 });
      const messages = collect(receiver);
      const subject = unique("s.all");
      await nc.flush();
      nc.publish("$MQG.admin.secret", "hidden");
      nc.publish(subject, "visible");
      await eventually(
        () => (messages.seen.some((m) => m.message.to === subject) ? true : undefined),
        5_000,
        "the visible message",
      );
      expect(messages.seen.some((m) => String(m.message.to).startsWith("$MQG"))).toBe(false);
      receiver.close();
    });

    it("a dynamic source gets an inbox for replies: request/reply with a NATS service", async () => {
      const service = unique("svc.echo");
      nc.subscribe(service, {
        callback: (_e, m) => {
          m.respond(`echo:${m.string()}`, { headers: m.headers });
        },
      });
      await nc.flush();
      const replies = await amqp.receiver({ source: DYNAMIC });
      const inbox = (replies.source as { address: string }).address;
      expect(inbox).toMatch(/^_INBOX\./);
      const messages = collect(replies);
      const sender = await amqp.sender(service);
      await send(sender, {
        body: rhea.message.data_section(Buffer.from("ping")),
        reply_to: inbox,
        correlation_id: "c-1",
      });
      const { message } = await messages.next();
      expect(bodyText(message)).toBe("echo:ping");
      sender.close();
      replies.close();
    });

    it("request/reply with an MQTT 5 responder", async () => {
      const topic = unique("svc.mqtt").replace(/\./g, "/");
      const responder = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
      responder.on("message", (_t, payload, packet) => {
        const p = packet.properties!;
        responder.publish(p.responseTopic!, `answer:${payload.toString()}`, {
          qos: 0,
          properties: { correlationData: p.correlationData },
        });
      });
      await responder.subscribeAsync(topic);
      const replies = await amqp.receiver({ source: DYNAMIC });
      const inbox = (replies.source as { address: string }).address;
      const messages = collect(replies);
      const sender = await amqp.sender(topic.replace(/\//g, "."));
      await send(sender, {
        body: rhea.message.data_section(Buffer.from("q")),
        reply_to: inbox,
        correlation_id: "corr-mqtt",
      });
      const { message } = await messages.next();
      expect(bodyText(message)).toBe("answer:q");
      expect(message.correlation_id).toBe("corr-mqtt");
      await responder.endAsync();
      sender.close();
      replies.close();
    });
  });

  describe("credit and drain (issue 4, item 4)", () => {
    it("a receiver granting credit 1 gets one message; more credit, more messages", async () => {
      const subject = unique("c.one");
      const receiver = await amqp.receiver({ source: subject, credit_window: 0, autoaccept: true });
      const messages = collect(receiver);
      for (let i = 0; i < 3; i++) nc.publish(subject, `m${i}`);
      await nc.flush();
      receiver.add_credit(1);
      expect(bodyText((await messages.next()).message)).toBe("m0");
      expect(await messages.none(300)).toBe(true);
      receiver.add_credit(2);
      expect((await messages.take(2)).map((m) => bodyText(m.message))).toEqual(["m1", "m2"]);
      receiver.close();
    });

    it("drain: what is there is sent, the rest of the credit comes back drained", async () => {
      const subject = unique("c.drain");
      const receiver = await amqp.receiver({ source: subject, credit_window: 0 });
      const messages = collect(receiver);
      nc.publish(subject, "only one");
      await nc.flush();
      const drained = new Promise<void>((resolve) => receiver.once("receiver_drained", () => resolve()));
      receiver.add_credit(5);
      receiver.drain_credit();
      await drained;
      expect(messages.seen.map((m) => bodyText(m.message))).toEqual(["only one"]);
      expect((receiver as unknown as { credit: number }).credit).toBe(0);
      receiver.close();
    });
  });

  describe("with MQTT clients on the same subjects", () => {
    it("an MQTT publish reaches an AMQP receiver as one data section with `to` = the subject", async () => {
      const subject = unique("m.in");
      const receiver = await amqp.receiver(subject);
      const messages = collect(receiver);
      const client = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
      await client.publishAsync(subject.replace(/\./g, "/"), "from mqtt", {
        qos: 1,
        properties: { userProperties: { k: "v" }, contentType: "text/plain" },
      });
      const { message } = await messages.next();
      expect(message.to).toBe(subject);
      expect(bodyText(message)).toBe("from mqtt");
      expect(message.application_properties).toEqual({ k: "v" });
      expect(message.content_type).toBe("text/plain");
      await client.endAsync();
      receiver.close();
    });

    it("an AMQP send reaches an MQTT 5 subscriber with its properties as user properties", async () => {
      const subject = unique("m.out");
      const client = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
      const got = collectMqtt(client);
      await client.subscribeAsync(subject.replace(/\./g, "/"), { qos: 1 });
      const sender = await amqp.sender(subject);
      await send(sender, {
        body: rhea.message.data_section(Buffer.from("to mqtt")),
        content_type: "text/plain",
        application_properties: { unit: "C", n: 1.5 },
      });
      await got.count(1);
      const { payload, packet } = got.seen[0]!;
      expect(payload.toString()).toBe("to mqtt");
      expect(packet.properties?.contentType).toBe("text/plain");
      expect(packet.properties?.userProperties).toEqual({ unit: "C", n: "1.5" });
      await client.endAsync();
      sender.close();
    });
  });

  describe("routes (issue 4, item 6)", () => {
    it("a send to the route's subject goes to the subject its application properties build", async () => {
      const region = `eu west ${process.pid}`;
      const got = nextMsg(nc, `orders.eu%20west%20${process.pid}`);
      await nc.flush();
      const sender = await amqp.sender("orders");
      expect(await send(sender, { body: "order", application_properties: { region } })).toEqual({ state: "accepted" });
      expect((await got).headers?.get("Mqgw-Prop-region")).toBe(region);
      sender.close();
    });

    it("a missing property: unsettled is rejected with precondition-failed naming it; presettled is dropped and counted", async () => {
      const sender = await amqp.sender("orders");
      const outcome = await send(sender, { body: "no region" });
      expect(outcome).toMatchObject({ state: "rejected", error: { condition: "amqp:precondition-failed" } });
      expect((outcome as { error: { description: string } }).error.description).toMatch(/region/);
      // A send straight to a built subject must agree with its properties.
      const direct = await amqp.sender("orders.eu");
      expect(await send(direct, { body: "x", application_properties: { region: "us" } })).toMatchObject({
        state: "rejected",
        error: { condition: "amqp:precondition-failed" },
      });
      const before = await metric(gw, "mqgw_dropped_total", { protocol: "amqp", reason: "route_property_missing" });
      const settled = await amqp.sender({ target: { address: "orders" }, snd_settle_mode: 1 });
      await sendSettled(settled, { body: "dropped" });
      await eventually(
        async () =>
          (await metric(gw, "mqgw_dropped_total", { protocol: "amqp", reason: "route_property_missing" })) > before
            ? true
            : undefined,
        5_000,
        "the drop counted",
      );
      sender.close();
      direct.close();
      settled.close();
    });
  });
  it("logged no errors along the way", () => {
    expect(gw.logs.filter((l) => Number(l.level) >= 50)).toEqual([]);
  });
});
