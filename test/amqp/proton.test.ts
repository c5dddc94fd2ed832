// Issue 4, "Done when": Debian's python3-qpid-proton against the gateway, both
// directions, with NATS, MQTT and rhea clients on the same subjects.
import { join } from "node:path";
import { AckPolicy, type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect as collectMqtt, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { runPython } from "../helpers/python.js";
import { AmqpClient, bodyText, collect, rhea } from "./rheaClient.js";

/** A Python client (system python: Debian's proton) in ./clients whose JSON lines can be awaited. */
const python = (script: string, args: string[]) => runPython(join(import.meta.dirname, "clients", script), args);

let n = 0;
const unique = (prefix: string) => `${prefix}.${process.pid}x${++n}`;

describe("Qpid Proton (Python) clients", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let url: string;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "PROTON", subjects: ["proton.stored.>"] });
    gw = await startGateway({ nats: nats.url, config: { bindings: [{ stream: "PROTON" }] } });
    url = `amqp://127.0.0.1:${gw.port("amqp")}`;
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("proton sends: NATS reads the data section's bytes, MQTT too, rhea the sender's own sections", async () => {
    const subject = unique("proton.out");
    const sub = nc.subscribe(subject, { max: 2 });
    const mqtt = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    const mqttGot = collectMqtt(mqtt);
    await mqtt.subscribeAsync(subject.replace(/\./g, "/"));
    const amqp = await AmqpClient.open(gw.port("amqp"));
    const rheaGot = collect(await amqp.receiver(subject));
    await nc.flush();

    const data = python("send.py", [url, subject, "--data", "bytes from proton", "--prop", "site=lab"]);
    expect(await data.upTo(1)).toEqual([{ outcome: "accepted" }]);
    const value = python("send.py", [url, subject, "--body", "a string", "--settled"]);
    await value.upTo(1);
    await Promise.all([data.exit(), value.exit()]);

    const nats: Array<{ data: string; headers: Record<string, string | undefined> }> = [];
    for await (const m of sub)
      nats.push({
        data: Buffer.from(m.data).toString("hex"),
        headers: Object.fromEntries([...m.headers!].map(([k, v]) => [k, v[0]])),
      });
    expect(Buffer.from(nats[0]!.data, "hex").toString()).toBe("bytes from proton");
    expect(nats[0]!.headers).toMatchObject({ "Mqgw-QoS": "1", "Mqgw-Prop-site": "lab" });
    // Qpid sends a string as an amqp-value: NATS and MQTT clients read its AMQP encoding.
    expect(nats[1]!.headers["Mqgw-Amqp-Body"]).toBe("sections");
    expect(nats[1]!.headers["Mqgw-QoS"]).toBeUndefined();

    await mqttGot.count(2);
    expect(mqttGot.seen[0]!.payload.toString()).toBe("bytes from proton");
    expect(mqttGot.seen[0]!.packet.properties?.userProperties).toEqual({ site: "lab" });
    const [first, second] = await rheaGot.take(2);
    expect(bodyText(first!.message)).toBe("bytes from proton");
    expect(second!.message.body).toBe("a string");
    await mqtt.endAsync();
    await amqp.close();
  });

  it("proton receives: from NATS, from MQTT and from rhea", async () => {
    const subject = unique("proton.in");
    const recv = python("receive.py", [url, subject, "--count", "3"]);
    await recv.upTo(1);
    nc.publish(subject, "from nats");
    const mqtt = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await mqtt.publishAsync(subject.replace(/\./g, "/"), "from mqtt", {
      qos: 1,
      properties: { userProperties: { k: "v" } },
    });
    const amqp = await AmqpClient.open(gw.port("amqp"));
    const s = await amqp.sender(subject);
    s.send({ body: { an: "amqp map" } as never, application_properties: { from: "rhea" } });
    const [, a, b, c] = await recv.upTo(4);
    expect(a).toMatchObject({ to: subject, data: "from nats" });
    expect(b).toMatchObject({ to: subject, data: "from mqtt", properties: { k: "v" } });
    expect(c).toMatchObject({ value: { an: "amqp map" }, properties: { from: "rhea" } });
    expect(await recv.exit()).toBe(0);
    await mqtt.endAsync();
    await amqp.close();
  });

  it("proton's dynamic source is a reply address: answers from a NATS service and an MQTT 5 responder arrive", async () => {
    const recv = python("receive.py", [url, "", "--count", "2", "--dynamic"]);
    const [ready] = await recv.upTo(1);
    const inbox = String(ready!.address);
    expect(inbox).toMatch(/^_INBOX\./);
    const service = unique("proton.svc");
    nc.subscribe(service, { max: 1, callback: (_e, m) => m.respond(`nats:${m.string()}`, { headers: m.headers }) });
    await nc.flush();
    const topic = unique("proton.mqttsvc").replace(/\./g, "/");
    const responder = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    responder.on("message", (_t, payload, packet) => {
      const p = packet.properties!;
      responder.publish(p.responseTopic!, `mqtt:${payload.toString()}`, {
        qos: 0,
        properties: { correlationData: p.correlationData },
      });
    });
    await responder.subscribeAsync(topic);
    const amqp = await AmqpClient.open(gw.port("amqp"));
    const ask = async (address: string, correlation: string) => {
      const s = await amqp.sender(address);
      s.send({ body: rhea.message.data_section(Buffer.from("q")), reply_to: inbox, correlation_id: correlation });
    };
    await ask(service, "c-nats");
    const [, first] = await recv.upTo(2);
    await ask(topic.replace(/\//g, "."), "c-mqtt");
    const [, , second] = await recv.upTo(3);
    expect(first).toMatchObject({ data: "nats:q", correlation_id: "c-nats" });
    expect(second).toMatchObject({ data: "mqtt:q", correlation_id: "c-mqtt" });
    expect(await recv.exit()).toBe(0);
    await responder.endAsync();
    await amqp.close();
  });

  it("proton on the anonymous relay, with per-message refusal; and a refused attach", async () => {
    const subject = unique("proton.relay");
    const sub = nc.subscribe(subject, { max: 1 });
    await nc.flush();
    const ok = python("send.py", [url, "-", "--data", "relayed", "--to", subject]);
    const bad = python("send.py", [url, "-", "--data", "x", "--to", "proton.*"]);
    const admin = python("send.py", [url, "$MQG.admin.ping.list", "--data", "x"]);
    expect(await ok.upTo(1)).toEqual([{ outcome: "accepted" }]);
    expect((await bad.upTo(1))[0]).toMatchObject({ outcome: "rejected", condition: "amqp:invalid-field" });
    expect((await admin.upTo(1))[0]).toMatchObject({ link_error: "amqp:unauthorized-access" });
    for await (const m of sub) expect(m.string()).toBe("relayed");
    await Promise.all([ok.exit(), bad.exit(), admin.exit()]);
  });

  it("an operator queue: proton settles half and detaches; rhea gets the other half", async () => {
    await jsm.consumers.add("PROTON", {
      durable_name: "work",
      ack_policy: AckPolicy.Explicit,
      filter_subject: "proton.stored.jobs",
    });
    for (let i = 0; i < 4; i++) nc.publish("proton.stored.jobs", `job ${i}`);
    await nc.flush();
    const recv = python("receive.py", [url, "proton.stored.jobs::work", "--count", "4", "--accept", "2"]);
    const lines = await recv.upTo(5);
    expect(lines.slice(1).map((l) => l.data)).toEqual(["job 0", "job 1", "job 2", "job 3"]);
    expect(await recv.exit()).toBe(0);

    const amqp = await AmqpClient.open(gw.port("amqp"));
    const r = await amqp.receiver({ source: "proton.stored.jobs::work", autoaccept: true });
    const got = collect(r);
    const rest = await got.take(2);
    // Redelivered messages keep no order among themselves.
    expect(rest.map((m) => bodyText(m.message)).sort()).toEqual(["job 2", "job 3"]);
    expect(await got.none(300)).toBe(true);
    await amqp.close();
  });

  it("a durable subscription (Proton's DurableSubscription): kept across a detach, ended by the close", async () => {
    const durable = ["--durable", "proton-sub", "--container", "proton-durable"];
    const consumers = async () => {
      const names: string[] = [];
      for await (const c of jsm.consumers.list("PROTON")) if (c.name.startsWith("mqgw-amqp-")) names.push(c.name);
      return names;
    };
    const first = python("receive.py", [url, "proton.stored.news", "--count", "1", ...durable, "--keep"]);
    expect((await first.upTo(1))[0]).toMatchObject({ ready: true, durable: 2, never_expires: true });
    nc.publish("proton.stored.news", "while here");
    expect((await first.upTo(2))[1]).toMatchObject({ data: "while here" });
    expect(await first.exit()).toBe(0);
    for (const m of ["while away 1", "while away 2"]) nc.publish("proton.stored.news", m);
    await nc.flush();
    expect(await consumers()).toHaveLength(1);
    const second = python("receive.py", [url, "proton.stored.news", "--count", "2", ...durable]);
    expect((await second.upTo(3)).slice(1).map((l) => l.data)).toEqual(["while away 1", "while away 2"]);
    expect(await second.exit()).toBe(0);
    // The close (closed=true) ended the subscription.
    await eventually(async () => ((await consumers()).length === 0 ? true : undefined), 5_000, "unsubscribed");
  });

  it("logged no errors along the way", () => {
    expect(gw.logs.filter((l) => Number(l.level) >= 50)).toEqual([]);
  });
});
