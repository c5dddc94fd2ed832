// Issue 26, item 4: publish quotas per client and per account (docs/decisions/quotas.md).
// A client over its quota gets 0x97 (MQTT 5), is closed (3.1.1), or its transfers are
// rejected amqp:resource-limit-exceeded, and nothing refused reaches NATS; the other
// clients of its account and of other accounts keep their throughput; a SIGHUP changes
// the quotas of clients already connected. Rates are chosen so that the outcome does not
// depend on the machine's speed: 50 messages back to back against 5/s with a burst of 5
// are refused in part unless sending them takes nine seconds.
import { readFileSync, writeFileSync } from "node:fs";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { MqttClient } from "mqtt";
import type mqttPacket from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { AmqpClient, type Outcome, send, sendSettled } from "../amqp/rheaClient.js";
import { type GatewayHandle, metric, startGateway } from "../helpers/gateway.js";
import { connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const users = (...names: string[]) => names.map((n) => `{ user: ${n}, password: ${n} }`).join("\n    ");
const serverConfig = `
accounts {
  SYS { users: [ { user: sys, password: sys } ] }
  A { jetstream: enabled
    users: [
    ${users("mqga", "obsa", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9")}
    ] }
  B { jetstream: enabled
    users: [
    ${users("mqgb", "obsb", "b1", "b2")}
    ] }
}
system_account: SYS
`;

const gatewayConfig = (limits: Record<string, unknown>) => ({
  gateway_users: { A: { user: "mqga", password: "mqga" }, B: { user: "mqgb", password: "mqgb" } },
  routing: [
    { username: "a*", account: "A" },
    { username: "b*", account: "B" },
  ],
  // QoS 1 to an unbound subject is a core publish only: what is measured is the quota, not the store.
  mqtt: { listen: "127.0.0.1:0", messages_stream: "" },
  log: { level: "info", format: "json" },
  limits,
});

const CLIENT_5_PER_S = { per_client: { messages_rate: "5/s", messages_burst: 5 } };
const login = (user: string) => ({ username: user, password: user });

/** QoS 1 (or 2) publishes sent back to back; each resolves with its PUBACK's (PUBREC's) reason code. */
function qos1Burst(
  c: MqttClient,
  topic: string,
  n: number,
  qos: (i: number) => 1 | 2 = () => 1,
  payload = "x",
): Promise<number[]> {
  return Promise.all(
    Array.from(
      { length: n },
      (_, i) =>
        new Promise<number>((resolve) =>
          c.publish(`${topic}/${i}`, payload, { qos: qos(i) }, (err, packet) =>
            resolve(
              err ? ((err as { code?: number }).code ?? -1) : ((packet as { reasonCode?: number })?.reasonCode ?? 0),
            ),
          ),
        ),
    ),
  );
}

/** Counts what NATS delivers on a subject (the subscription is in place when this resolves). */
async function counting(nc: NatsConnection, subject: string) {
  const seen: string[] = [];
  const sub = nc.subscribe(subject, { callback: (_e, m) => seen.push(m.subject) });
  await nc.flush();
  return { seen, stop: () => sub.unsubscribe() };
}

/**
 * Sends `marker` on the same client until the quota lets it through; once NATS has it, every
 * message the client had acknowledged before has reached NATS too (one connection keeps order).
 */
async function throughMarker(c: MqttClient, topic: string, seen: string[]): Promise<void> {
  await eventually(async () => ((await qos1Burst(c, topic, 1))[0] === 0 ? true : undefined), 10_000, "marker accepted");
  await eventually(() => (seen.some((s) => s.startsWith(`${topic.replaceAll("/", ".")}.`)) ? true : undefined));
}

const ended = (c: MqttClient) => new Promise<void>((r) => c.end(false, {}, () => r()));

describe("per-client quotas (limits.per_client)", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let obsA: NatsConnection;
  let obsB: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer({ config: serverConfig });
    gw = await startGateway({ nats: nats.url, config: gatewayConfig(CLIENT_5_PER_S) });
    obsA = await connect({ servers: nats.url, user: "obsa", pass: "obsa" });
    obsB = await connect({ servers: nats.url, user: "obsb", pass: "obsb" });
  });
  afterAll(async () => {
    await obsA?.close();
    await obsB?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("MQTT 5: over its rate a client gets PUBACK/PUBREC 0x97 and nothing refused reaches NATS; a client of its account and one of another account lose nothing", async () => {
    const greedy = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, ...login("a1") });
    const sameAccount = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, ...login("a2") });
    const otherAccount = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, ...login("b1") });
    const a = await counting(obsA, "q.>");
    const b = await counting(obsB, "q.>");

    const [flood, neighbour, stranger] = await Promise.all([
      // QoS 1 and 2 in turn: the refused ones, all but the first few, are of both.
      qos1Burst(greedy, "q/greedy", 50, (i) => (i % 2 === 0 ? 1 : 2)),
      qos1Burst(sameAccount, "q/same", 5),
      qos1Burst(otherAccount, "q/other", 5),
    ]);
    const accepted = flood.filter((rc) => rc === 0).length;
    expect(flood.filter((rc) => rc === 0x97).length).toBe(50 - accepted);
    expect(flood.slice(-10)).toEqual(Array(10).fill(0x97));
    expect(accepted).toBeGreaterThanOrEqual(5);
    expect(accepted).toBeLessThan(50);
    expect(neighbour).toEqual([0, 0, 0, 0, 0]);
    expect(stranger).toEqual([0, 0, 0, 0, 0]);
    expect(await metric(gw, "mqgw_refused_total", { protocol: "mqtt", reason: "quota_exceeded" })).toBe(50 - accepted);
    expect(await metric(gw, "mqgw_quota_exceeded_total", { protocol: "mqtt", scope: "client", account: "A" })).toBe(
      50 - accepted,
    );

    await throughMarker(greedy, "q/greedy-marker", a.seen);
    expect(a.seen.filter((s) => s.startsWith("q.greedy.")).length).toBe(accepted);
    expect(a.seen.filter((s) => s.startsWith("q.same.")).length).toBe(5);
    await eventually(() => (b.seen.length === 5 ? true : undefined));
    a.stop();
    b.stop();
    await Promise.all([ended(greedy), ended(sameAccount), ended(otherAccount)]);
  });

  it("MQTT 5 QoS 0 over the rate: dropped and counted, the client stays connected", async () => {
    const c = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, ...login("a3") });
    const a = await counting(obsA, "q0.>");
    const dropped = await metric(gw, "mqgw_dropped_total", { protocol: "mqtt", reason: "quota_exceeded" });
    for (let i = 0; i < 50; i++) c.publish(`q0/flood/${i}`, "x", { qos: 0 });
    // QoS 1 after the flood, on the same connection: once it is through, the flood has been judged.
    await throughMarker(c, "q0/marker", a.seen);
    const through = a.seen.filter((s) => s.startsWith("q0.flood.")).length;
    expect(through).toBeGreaterThanOrEqual(5);
    expect(through).toBeLessThan(50);
    expect((await metric(gw, "mqgw_dropped_total", { protocol: "mqtt", reason: "quota_exceeded" })) - dropped).toBe(
      50 - through,
    );
    expect(c.connected).toBe(true);
    a.stop();
    await ended(c);
  });

  it("MQTT 3.1.1 over the rate at QoS 1: closed (it has no negative PUBACK); the others carry on", async () => {
    const v4 = await RawMqtt.connected(gw.port("mqtt"), 4, { username: "a4", password: Buffer.from("a4") });
    const other = await connectMqtt(gw.port("mqtt"), { protocolVersion: 4, ...login("a5") });
    for (let i = 1; i <= 50; i++)
      v4.send({
        cmd: "publish",
        topic: "q4/flood",
        payload: Buffer.from("x"),
        qos: 1,
        messageId: i,
        retain: false,
        dup: false,
      } as mqttPacket.Packet);
    await v4.waitClosed(10_000);
    const acks = v4.packets.filter((p) => p.cmd === "puback").length;
    expect(acks).toBeGreaterThanOrEqual(5);
    expect(acks).toBeLessThan(50);
    expect(await qos1Burst(other, "q4/other", 5)).toEqual([0, 0, 0, 0, 0]);
    await ended(other);
  });

  it("AMQP: unsettled transfers over the rate are rejected amqp:resource-limit-exceeded; presettled ones dropped and counted", async () => {
    const amqp = await AmqpClient.open(gw.port("amqp"), login("a6"));
    const other = await AmqpClient.open(gw.port("amqp"), login("b2"));
    const a = await counting(obsA, "amqp.>");
    const sender = await amqp.sender({ target: { address: "amqp.flood" } });
    const bystander = await other.sender({ target: { address: "amqp.other" } });
    const [outcomes, theirs] = await Promise.all([
      Promise.all(Array.from({ length: 50 }, () => send(sender, { body: "x" }))),
      Promise.all(Array.from({ length: 5 }, () => send(bystander, { body: "x" }))),
    ]);
    const accepted = outcomes.filter((o) => o.state === "accepted").length;
    const rejected = outcomes.filter((o): o is Extract<Outcome, { state: "rejected" }> => o.state === "rejected");
    expect(accepted).toBeGreaterThanOrEqual(5);
    expect(rejected.length).toBe(50 - accepted);
    expect(rejected[0]?.error.condition).toBe("amqp:resource-limit-exceeded");
    expect(rejected[0]?.error.description).toMatch(/limits\.per_client allows 5 messages\/s \(burst 5\)/);
    expect(theirs.every((o) => o.state === "accepted")).toBe(true);
    // Accepted means published: NATS has each accepted one, and only those.
    await eventually(() => (a.seen.filter((s) => s === "amqp.flood").length === accepted ? true : undefined));

    // Presettled: dropped and counted, no answer to give. The quota refills: wait for a full burst first.
    const presettled = await amqp.sender({ target: { address: "amqp.settled" }, snd_settle_mode: 1 });
    await eventually(async () => ((await send(sender, { body: "probe" })).state === "accepted" ? true : undefined));
    const dropped = await metric(gw, "mqgw_dropped_total", { protocol: "amqp", reason: "quota_exceeded" });
    for (let i = 0; i < 50; i++) await sendSettled(presettled, { body: "x" });
    await eventually(async () => {
      const now = await metric(gw, "mqgw_dropped_total", { protocol: "amqp", reason: "quota_exceeded" });
      const through = a.seen.filter((s) => s === "amqp.settled").length;
      return now - dropped + through === 50 && now > dropped ? true : undefined;
    });
    a.stop();
    await amqp.close();
    await other.close();
  });
});

describe("per-account quotas (limits.per_account) and reloads", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let obsB: NatsConnection;

  /** Rewrites the gateway's limits and waits for the reload it asks for. */
  const reloadWith = async (limits: Record<string, unknown>) => {
    const config = parse(readFileSync(gw.file, "utf8")) as Record<string, unknown>;
    writeFileSync(gw.file, stringify({ ...config, limits }));
    const before = gw.logs.filter((l) => l.msg === "config reloaded").length;
    gw.process.kill("SIGHUP");
    await gw.waitForLog(
      (l) => l.msg === "config reloaded" && gw.logs.filter((x) => x.msg === l.msg).indexOf(l) === before,
    );
  };

  beforeAll(async () => {
    nats = await startNatsServer({ config: serverConfig });
    gw = await startGateway({
      nats: nats.url,
      config: gatewayConfig({ per_account: { messages_rate: "10/s", messages_burst: 10 } }),
    });
    obsB = await connect({ servers: nats.url, user: "obsb", pass: "obsb" });
  });
  afterAll(async () => {
    await obsB?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("an account over its quota: its MQTT and AMQP clients are refused naming limits.per_account; a client of another account keeps its throughput", async () => {
    const a1 = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, ...login("a7") });
    const a2 = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, ...login("a8") });
    const amqp = await AmqpClient.open(gw.port("amqp"), login("a9"));
    const sender = await amqp.sender({ target: { address: "acc.amqp" } });
    const b1 = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, ...login("b1") });
    const b = await counting(obsB, "acc.>");
    const [one, two, three, other] = await Promise.all([
      qos1Burst(a1, "acc/a1", 50),
      qos1Burst(a2, "acc/a2", 50),
      Promise.all(Array.from({ length: 50 }, () => send(sender, { body: "x" }))),
      qos1Burst(b1, "acc/b1", 10),
    ]);
    const accountA = [...one, ...two, ...three.map((o) => (o.state === "accepted" ? 0 : -1))];
    const accepted = accountA.filter((rc) => rc === 0).length;
    expect(accepted).toBeGreaterThanOrEqual(10);
    expect(accepted).toBeLessThan(150);
    expect([...one, ...two].filter((rc) => rc !== 0 && rc !== 0x97)).toEqual([]);
    const rejected = three.filter((o): o is Extract<Outcome, { state: "rejected" }> => o.state === "rejected");
    expect(rejected.length).toBe(three.filter((o) => o.state !== "accepted").length);
    // 50 transfers against a burst of 10: some are refused whatever the MQTT clients got.
    expect(rejected.length).toBeGreaterThan(0);
    expect(rejected[0]?.error).toMatchObject({
      condition: "amqp:resource-limit-exceeded",
      description: expect.stringMatching(/limits\.per_account allows 10 messages\/s \(burst 10\)/),
    });
    expect(other).toEqual(Array(10).fill(0));
    await eventually(() => (b.seen.length === 10 ? true : undefined));
    expect(await metric(gw, "mqgw_quota_exceeded_total", { scope: "account", account: "A" })).toBe(150 - accepted);
    expect(await metric(gw, "mqgw_quota_exceeded_total", { account: "B" })).toBe(0);
    b.stop();
    await amqp.close();
    await Promise.all([ended(a1), ended(a2), ended(b1)]);
  });

  it("SIGHUP: a changed quota applies to clients already connected: off, on, and bytes instead of messages", async () => {
    const c = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, ...login("a7") });
    // Off: the connected client's 50 all go through.
    await reloadWith({});
    expect(await qos1Burst(c, "reload/off", 50)).toEqual(Array(50).fill(0));
    // On again, per client this time: the same connection is now held to 5/s.
    await reloadWith(CLIENT_5_PER_S);
    const limited = await qos1Burst(c, "reload/on", 50);
    expect(limited.filter((rc) => rc === 0x97).length).toBeGreaterThan(0);
    expect(limited.filter((rc) => rc === 0).length).toBeGreaterThanOrEqual(5);
    // Bytes instead: 50 payloads of 200 bytes against 1 KiB/s with a burst of 1 KiB.
    await reloadWith({ per_client: { bytes_rate: "1KiB/s", bytes_burst: "1KiB" } });
    const bytes = await qos1Burst(c, "reload/bytes", 50, () => 1, "b".repeat(200));
    expect(bytes.slice(0, 5)).toEqual(Array(5).fill(0));
    expect(bytes.slice(-10)).toEqual(Array(10).fill(0x97));
    await ended(c);
  });
});
