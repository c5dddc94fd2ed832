// Issue 25 item 9: `ctl sessions`, `subscriptions`, `retained` and `ban` as an operator runs
// them (the built CLI as a child process), against TWO gateways sharing one nats-server:
// a session held by one gateway is dropped through the other; a ban made through one
// refuses the client on both (MQTT 5 0x8A, 3.1.1 0x05, AMQP amqp:unauthorized-access). The
// nats-server runs the permissions `generate` prints.
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import rhea from "rhea";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { CLIENT_USERS, SECRETS, withSystemAccount } from "../admin/world.js";
import { AmqpClient } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const bin = join(import.meta.dirname, "../../bin/mq-gateway.js");
const run = promisify(execFile);

/** One client account; the passwords come from the environment ("env:"), as the generated server's do. */
const FLEET = {
  admin: { user: "mqg-admin", password: "env:MQG_ADMIN_PASSWORD" },
  gateway_users: { PLANT_A: { user: "mqg-a", password: "env:MQG_A_PASSWORD" } },
};
const PLACEHOLDER = `# { user: "sensor-7", password: "..." }`;

/**
 * The nats-server config `generate` prints for the fleet (the admin account with JetStream
 * for the bans bucket), with PLANT_A's client users where it says they go: what the gateways
 * need for sessions, retained messages and bans is what `generate` grants.
 */
async function generatedServer(): Promise<string> {
  const file = join(mkdtempSync(join(tmpdir(), "mqgw-ctlstore-")), "fleet.yaml");
  writeFileSync(file, stringify(FLEET));
  const { stdout } = await run(process.execPath, [bin, "generate", "--format", "nats-server", "--config", file], {
    env: { ...process.env, ...SECRETS },
  });
  if (!stdout.includes(PLACEHOLDER)) throw new Error(`no client user placeholder in:\n${stdout}`);
  for (const variable of stdout.matchAll(/^# {3}\$([A-Za-z_][A-Za-z0-9_]*)/gm)) {
    const key = variable[1] as string;
    process.env[key] = key in SECRETS ? SECRETS[key as keyof typeof SECRETS] : `pw-${key}`;
  }
  return withSystemAccount(stdout.replace(PLACEHOLDER, CLIENT_USERS.PLANT_A));
}

describe("ctl sessions, subscriptions, retained and ban on two gateways", () => {
  let nats: NatsServerHandle;
  let gwA: GatewayHandle;
  let gwB: GatewayHandle;
  let plant: NatsConnection;
  let jsm: JetStreamManager;
  let connection: string[];

  function ctl(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const proc = spawn(process.execPath, [bin, "ctl", ...args, ...connection], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    proc.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
    proc.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
    const timer = setTimeout(() => proc.kill("SIGKILL"), 30_000);
    return new Promise((resolve) =>
      proc.once("close", (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      }),
    );
  }
  const ctlJson = async (...args: string[]) => {
    const r = await ctl(...args, "--json");
    expect(r.stderr).toBe("");
    return JSON.parse(r.stdout) as Record<string, unknown>;
  };

  beforeAll(async () => {
    nats = await startNatsServer({ config: await generatedServer() });
    [gwA, gwB] = (await Promise.all(
      ["gw-a", "gw-b"].map((id) =>
        startGateway({ nats: nats.url, config: FLEET, args: ["--id", id], env: { ...SECRETS } }),
      ),
    )) as [GatewayHandle, GatewayHandle];
    await Promise.all(
      [gwA, gwB].map((gw) => gw.waitForLog((l) => l.msg === "admin connection serving the admin subjects")),
    );
    connection = ["--server", nats.url, "--user", "mqg-operator", "--password", SECRETS.MQG_OPERATOR_PASSWORD];
    // The gateway user reads its replies under $MQG.inbox (generate grants it no _INBOX).
    plant = await connect({
      servers: nats.url,
      user: "mqg-a",
      pass: SECRETS.MQG_A_PASSWORD,
      inboxPrefix: "$MQG.inbox.test",
    });
    jsm = await jetstreamManager(plant);
  });
  afterAll(async () => {
    await plant?.close();
    await Promise.all([gwA?.stop(), gwB?.stop()]);
    await nats?.stop();
  });

  it("sessions: listed with their subscriptions; dropped through the other gateway, client, consumers and record go", async () => {
    const client = await connectMqtt(gwA.port("mqtt"), {
      protocolVersion: 5,
      clientId: "keep-1",
      clean: false,
      properties: { sessionExpiryInterval: 600 },
    });
    await client.subscribeAsync("s/+/t", { qos: 1 });
    await client.subscribeAsync("s/x", { qos: 0 });
    const listed = await eventually(async () => {
      const reply = await ctlJson("sessions", "--account", "PLANT_A");
      const sessions = reply.sessions as Array<Record<string, unknown>>;
      const s = sessions.find((x) => x.client_id === "keep-1");
      return (s?.subscriptions as unknown[] | undefined)?.length === 2 ? s : undefined;
    });
    expect(listed).toMatchObject({ connected: true, gateway: "gw-a" });
    expect(listed.subscriptions).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ filter: "s/+/t", qos: 1, stream: expect.any(String) }),
        expect.objectContaining({ filter: "s/x", qos: 0 }),
      ]),
    );

    const table = await ctl("sessions", "--account", "PLANT_A");
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^keep-1\s+yes\s+gw-a\s+-\s+s\/\+\/t \(QoS 1\), s\/x \(QoS 0\)$/m);

    const shown = await ctlJson("sessions", "show", "keep-1", "--account", "PLANT_A");
    const stored = (shown.session as { subscriptions: Array<Record<string, unknown>> }).subscriptions.find(
      (s) => s.filter === "s/+/t",
    )!;
    expect(stored).toMatchObject({ consumer: expect.any(String), pending: 0, ack_pending: 0 });
    const consumer = { stream: String(stored.stream), name: String(stored.consumer) };
    expect(await jsm.consumers.info(consumer.stream, consumer.name)).toBeTruthy();

    const disconnect = new Promise<number | undefined>((resolve) =>
      client.once("disconnect", (p) => resolve(p.reasonCode)),
    );
    // Held by gw-a, dropped through gw-b.
    const dropped = await ctl("sessions", "drop", "keep-1", "--account", "PLANT_A", "--gateway", "gw-b");
    expect(dropped).toMatchObject({ code: 0, stderr: "" });
    expect(dropped.stdout).toMatch(
      /^dropped the session of keep-1 \(1 consumer\(s\) deleted; its client was disconnected from gateway gw-a\)$/m,
    );
    expect(await disconnect).toBe(0x98);
    await expect(jsm.consumers.info(consumer.stream, consumer.name)).rejects.toThrow(/consumer not found/i);
    const kv = await new Kvm(plant).open("MQGW_SESSIONS");
    const record = await kv.get(Buffer.from("keep-1").toString("base64url"));
    expect(record === null || record.operation !== "PUT").toBe(true);
    client.end(true);

    const again = await ctl("sessions", "show", "keep-1", "--account", "PLANT_A");
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/no session of client "keep-1"/);
  });

  it("subscriptions: each gateway's clients' live filters and QoS (AMQP: source addresses), filtered by client id", async () => {
    const a = await connectMqtt(gwA.port("mqtt"), { clientId: "subs-a" });
    const b = await connectMqtt(gwB.port("mqtt"), { protocolVersion: 5, clientId: "subs-b" });
    const c = await AmqpClient.open(gwA.port("amqp"), { container_id: "subs-amqp" });
    await a.subscribeAsync("plant/+/temp", { qos: 1 });
    await b.subscribeAsync("plant/#", { qos: 0 });
    await c.receiver({ source: { address: "plant.>" } });
    try {
      const r = await ctl("subscriptions", "--json");
      const replies = JSON.parse(r.stdout) as Array<{ id: string; subscriptions: Array<Record<string, unknown>> }>;
      expect(replies.map((x) => x.id)).toEqual(["gw-a", "gw-b"]);
      expect(replies[0]!.subscriptions).toContainEqual(
        expect.objectContaining({
          client_id: "subs-a",
          filter: "plant/+/temp",
          qos: 1,
          account: "PLANT_A",
          protocol: "mqtt",
        }),
      );
      expect(replies[1]!.subscriptions).toContainEqual(
        expect.objectContaining({ client_id: "subs-b", filter: "plant/#", qos: 0 }),
      );
      // An AMQP client's receiving links, by source address (AMQP has no QoS).
      expect(replies[0]!.subscriptions).toContainEqual(
        expect.objectContaining({ client_id: "subs-amqp", protocol: "amqp", filter: "plant.>", qos: null }),
      );
      const one = await ctl("subscriptions", "--client-id", "subs-b");
      expect(one.code).toBe(0);
      expect(one.stdout).toMatch(/^gw-b\s+\d+\s+mqtt\s+PLANT_A\s+subs-b\s+plant\/#\s+0$/m);
      expect(one.stdout).toMatch(/^1 subscription on 2 gateways$/m);
    } finally {
      a.end(true);
      b.end(true);
      await c.close();
    }
  });

  it("retained: listed under a filter, cleared by filter and by topic", async () => {
    const pub = await connectMqtt(gwA.port("mqtt"), { clientId: "retainer" });
    for (const topic of ["r/a/1", "r/a/2", "r/b"])
      await pub.publishAsync(topic, `v-${topic}`, { qos: 1, retain: true });
    pub.end(true);
    const under = await eventually(async () => {
      const reply = await ctlJson("retained", "list", "r/a/+", "--account", "PLANT_A");
      return reply.count === 2 ? reply : undefined;
    });
    expect((under.retained as Array<Record<string, unknown>>).map((m) => m.topic)).toEqual(["r/a/1", "r/a/2"]);
    expect((under.retained as Array<Record<string, unknown>>)[0]).toMatchObject({ bytes: 7 });

    const cleared = await ctl("retained", "clear", "r/a/#", "--account", "PLANT_A");
    expect(cleared).toMatchObject({ code: 0, stdout: "cleared 2 retained messages under r/a/#\n" });
    const left = await ctl("retained", "r/#", "--account", "PLANT_A");
    expect(left.stdout).toMatch(/^r\/b\s+5\s+\d{4}-/m);
    expect(left.stdout).not.toMatch(/r\/a\//);
    expect((await ctl("retained", "clear", "r/b", "--account", "PLANT_A")).stdout).toBe(
      "cleared 1 retained message under r/b\n",
    );
    // A subscriber of the other gateway gets no retained message any more.
    const sub = await connectMqtt(gwB.port("mqtt"), { clientId: "late-sub" });
    const got: string[] = [];
    sub.on("message", (t) => got.push(t));
    await sub.subscribeAsync("r/#", { qos: 1 });
    await sub.publishAsync("r/marker", "m", { qos: 1 });
    await eventually(() => (got.includes("r/marker") ? true : undefined));
    expect(got).toEqual(["r/marker"]);
    sub.end(true);
  });

  /** The CONNACK code a raw MQTT client gets: MQTT 5's reason code or 3.1.1's return code. */
  async function connack(
    gw: GatewayHandle,
    version: 4 | 5,
    connectPacket: Partial<mqtt.IConnectPacket>,
  ): Promise<number> {
    const c = await RawMqtt.open(gw.port("mqtt"), version);
    c.send({
      cmd: "connect",
      protocolId: "MQTT",
      protocolVersion: version,
      clean: true,
      keepalive: 60,
      clientId: "x",
      ...connectPacket,
    } as mqtt.Packet);
    const ack = (await c.next("connack")) as mqtt.IConnackPacket;
    c.end();
    return (version === 5 ? ack.reasonCode : ack.returnCode) ?? -1;
  }

  /** How an AMQP open ends: "open" once a link attaches, else the condition the gateway closed with. */
  function amqpOutcome(gw: GatewayHandle, containerId: string): Promise<string> {
    return new Promise((resolve) => {
      const conn = rhea
        .create_container({ id: containerId })
        .connect({ host: "127.0.0.1", port: gw.port("amqp"), reconnect: false });
      const done = (outcome: string) => {
        resolve(outcome);
        conn.close();
      };
      conn.on("connection_open", () => conn.open_sender("ban/check").once("sendable", () => done("open")));
      conn.on("connection_close", (c) => done(String(c.connection.error?.condition ?? "closed")));
      conn.on("disconnected", () => done(String(conn.error?.condition ?? "disconnected")));
      conn.on("error", () => {});
    });
  }

  it("ban: a client id is refused on both gateways (MQTT 5 0x8A, 3.1.1 0x05, AMQP) until unbanned; a connected one is kicked", async () => {
    const connected = await connectMqtt(gwB.port("mqtt"), { protocolVersion: 5, clientId: "bad-1" });
    const kicked = new Promise<number | undefined>((resolve) =>
      connected.once("disconnect", (p) => resolve(p.reasonCode)),
    );
    const banned = await ctl("ban", "bad-1", "--reason", "floods plant/#", "--gateway", "gw-a");
    expect(banned).toMatchObject({ code: 0, stdout: "banned client id bad-1 on every gateway\n", stderr: "" });
    expect(await kicked).toBe(0x98);
    connected.end(true);

    for (const gw of [gwA, gwB]) {
      expect(await connack(gw, 5, { clientId: "bad-1" })).toBe(0x8a);
      expect(await connack(gw, 4, { clientId: "bad-1" })).toBe(0x05);
      expect(await amqpOutcome(gw, "bad-1")).toBe("amqp:unauthorized-access");
      expect(await connack(gw, 5, { clientId: "good-1" })).toBe(0);
      expect(await amqpOutcome(gw, "good-1")).toBe("open");
    }
    const listed = await ctlJson("bans");
    expect(listed.bans).toEqual([
      expect.objectContaining({ kind: "client_id", value: "bad-1", reason: "floods plant/#" }),
    ]);

    expect(await ctl("unban", "bad-1")).toMatchObject({ code: 0, stdout: "unbanned client id bad-1\n" });
    for (const gw of [gwA, gwB]) {
      await eventually(async () => ((await connack(gw, 5, { clientId: "bad-1" })) === 0 ? true : undefined));
      expect(await amqpOutcome(gw, "bad-1")).toBe("open");
    }
    expect((await ctl("unban", "bad-1")).code).toBe(1);
  });

  it("ban --for: refused on both gateways until it expires; by username and by address too", async () => {
    // Made through gw-a; gw-b hears of it through the bucket's watch.
    const refusedOnB = (c: Partial<mqtt.IConnectPacket>, code: number) =>
      eventually(async () => ((await connack(gwB, 5, c)) === code ? true : undefined));
    expect((await ctl("ban", "brief-1", "--for", "5s", "--gateway", "gw-a")).code).toBe(0);
    expect(await connack(gwA, 4, { clientId: "brief-1" })).toBe(0x05);
    await refusedOnB({ clientId: "brief-1" }, 0x8a);
    expect(await connack(gwB, 4, { clientId: "brief-1" })).toBe(0x05);
    await eventually(async () => ((await connack(gwB, 4, { clientId: "brief-1" })) === 0 ? true : undefined), 15_000);
    expect(await connack(gwA, 5, { clientId: "brief-1" })).toBe(0);

    expect((await ctl("ban", "--username", "sensor-a", "--gateway", "gw-a")).code).toBe(0);
    await refusedOnB({ clientId: "u-1", username: "sensor-a", password: Buffer.from("sensor-a-pw") }, 0x8a);
    expect(await connack(gwB, 5, { clientId: "u-1" })).toBe(0);
    expect((await ctl("unban", "--username", "sensor-a")).code).toBe(0);

    expect((await ctl("ban", "--address", "127.0.0.0/8", "--for", "1m", "--gateway", "gw-a")).code).toBe(0);
    expect(await connack(gwA, 5, { clientId: "addr-1" })).toBe(0x8a);
    await refusedOnB({ clientId: "addr-1" }, 0x8a);
    expect(await amqpOutcome(gwB, "addr-1")).toBe("amqp:unauthorized-access");
    expect((await ctl("unban", "--address", "127.0.0.0/8")).code).toBe(0);
    await eventually(async () => ((await connack(gwA, 5, { clientId: "addr-1" })) === 0 ? true : undefined));

    const bad = await ctl("ban", "--address", "10.0.0.0/33");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/prefix length must be 0 to 32/);
  });

  it("needs no permission beyond what generate grants: no gateway met a refusal", () => {
    const trouble = (gw: GatewayHandle) =>
      gw.logs.filter((l) =>
        /Permissions Violation|bans bucket not readable|admin request failed/i.test(JSON.stringify(l)),
      );
    expect([...trouble(gwA), ...trouble(gwB)]).toEqual([]);
  });
});
