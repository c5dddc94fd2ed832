// Issue 13, finding 4: nats-server runs on `generate --format nats-server` verbatim (two
// client accounts and the admin account; only the client users and the system account
// are added where the text says), and in each account everything the gateway does works:
// persistent QoS 1 subscribers on stored subjects receive what was published while they
// were away, retained messages, wills, AMQP operator queues, admin requests in their
// scopes. And account A reads nothing of B's through any of these paths, nor B of A's.
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { AckPolicy, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { AmqpClient, bodyText, collect } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { publishesOf } from "../helpers/inbound.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const run = promisify(execFile);
const bin = join(import.meta.dirname, "../../bin/mq-gateway.js");
const SECRETS = {
  MQG_ADMIN_PASSWORD: "admin-pw",
  MQG_OPERATOR_PASSWORD: "operator-pw",
  MQG_A_PASSWORD: "gw-a-pw",
  MQG_B_PASSWORD: "gw-b-pw",
};
const CONFIG = {
  id: "gw-gen",
  admin: { user: "mqg-admin", password: "env:MQG_ADMIN_PASSWORD" },
  gateway_users: {
    A: { user: "mqg-a", password: "env:MQG_A_PASSWORD" },
    B: { user: "mqg-b", password: "env:MQG_B_PASSWORD" },
  },
  routing: [
    { username: "a-*", account: "A" },
    { username: "b-*", account: "B" },
  ],
  // The same stream name in both accounts: the gateway must read each in its own.
  bindings: [
    { stream: "ORDERS", account: "A" },
    { stream: "ORDERS", account: "B" },
  ],
};
const PLACEHOLDER = `# { user: "sensor-7", password: "..." }`;
const ACCOUNTS = ["A", "B"] as const;
type Account = (typeof ACCOUNTS)[number];
const user = (x: Account) => `${x.toLowerCase()}-user`;
const login = (x: Account, clientId: string, extra: Partial<mqtt.IConnectPacket> = {}) => ({
  clientId,
  username: user(x),
  password: Buffer.from(`${user(x)}-pw`),
  ...extra,
});
const other = (x: Account): Account => (x === "A" ? "B" : "A");

async function generated(): Promise<string> {
  const file = join(mkdtempSync(join(tmpdir(), "mqgw-gen-")), "gateway.yaml");
  writeFileSync(file, stringify(CONFIG));
  const { stdout } = await run(process.execPath, [bin, "generate", "--format", "nats-server", "--config", file], {
    env: { ...process.env, ...SECRETS },
  });
  // The client users where the text says they go, one per account, and a system account for $SYS.REQ.USER.INFO.
  let text = stdout;
  for (const x of ACCOUNTS) {
    const at = text.indexOf(`"${x}" {`);
    const i = text.indexOf(PLACEHOLDER, at);
    text = `${text.slice(0, i)}{ user: "${user(x)}", password: "${user(x)}-pw" }${text.slice(i + PLACEHOLDER.length)}`;
  }
  return `${text.replace(/^accounts \{$/m, `accounts {\n  SYS { users: [ { user: "sys", password: "sys-pw" } ] }`)}\nsystem_account: SYS\n`;
}

async function qos1(c: RawMqtt, topic: string, payload: string, id: number, retain = false): Promise<number> {
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
async function subscribe(c: RawMqtt, topic: string, qos: 0 | 1): Promise<number[]> {
  c.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic, qos }] } as mqtt.Packet);
  return ((await c.next("suback")) as mqtt.ISubackPacket).granted as number[];
}

describe("the gateway on generated permissions: two client accounts and the admin account", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let operator: NatsConnection;
  const conns: NatsConnection[] = [];
  // A subscriber in each account on every topic used, connected all along: what it must never see is the other account's.
  const watchers = new Map<Account, ReturnType<typeof publishesOf>>();
  const watcherConns: RawMqtt[] = [];

  beforeAll(async () => {
    const text = await generated();
    for (const variable of text.matchAll(/^# {3}\$([A-Za-z_][A-Za-z0-9_]*)/gm)) {
      const key = variable[1] as string;
      process.env[key] = key in SECRETS ? SECRETS[key as keyof typeof SECRETS] : `pw-${key}`;
    }
    nats = await startNatsServer({ config: text });
    for (const x of ACCOUNTS) {
      const nc = await connect({ servers: nats.url, user: user(x), pass: `${user(x)}-pw` });
      conns.push(nc);
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: "ORDERS", subjects: ["orders.>"] });
      await jsm.consumers.add("ORDERS", {
        durable_name: "q",
        ack_policy: AckPolicy.Explicit,
        filter_subject: "orders.>",
      });
    }
    operator = await connect({ servers: nats.url, user: "mqg-operator", pass: SECRETS.MQG_OPERATOR_PASSWORD });
    gw = await startGateway({
      nats: nats.url,
      config: { ...CONFIG, log: { level: process.env.DEBUG_LOGS ? "debug" : "info", format: "json" } },
      env: SECRETS,
    });
    await gw.waitForLog((l) => l.msg === "admin connection serving the admin subjects");
    for (const x of ACCOUNTS) {
      const c = await RawMqtt.connected(gw.port("mqtt"), 5, login(x, `${x}-watcher`));
      watchers.set(x, publishesOf(c));
      // The topics every scenario uses, rather than #: a > subscription in the account keeps
      // nats-server serving pull requests whose inbox is gone (reported to the lead).
      for (const topic of ["orders/#", "status/#", "wills/#"]) expect(await subscribe(c, topic, 0)).toEqual([0]);
      watcherConns.push(c);
    }
  });
  afterAll(async () => {
    if (process.env.DEBUG_LOGS)
      console.log(
        gw?.logs
          .filter((l) => (l.level as number) >= Number(process.env.DEBUG_LOGS))
          .map((l) => JSON.stringify(l).slice(0, 500))
          .join("\n"),
      );
    for (const c of watcherConns) c.end();
    await operator?.close();
    for (const nc of conns) await nc.close();
    await gw?.stop();
    await nats?.stop();
  });

  for (const x of ACCOUNTS) {
    describe(`account ${x}`, () => {
      it("a persistent QoS 1 subscriber on a stored subject gets what was published while it was away", async () => {
        const sub = await RawMqtt.connected(
          gw.port("mqtt"),
          5,
          login(x, `${x}-sub`, { clean: false, properties: { sessionExpiryInterval: 300 } }),
        );
        // orders/+ (orders.*) lies inside the stream; orders/# would add the unstored parent `orders`.
        expect(await subscribe(sub, "orders/+", 1)).toEqual([1]);
        sub.end();
        await sub.waitClosed();
        const pub = await RawMqtt.connected(gw.port("mqtt"), 5, login(x, `${x}-pub`));
        for (let i = 0; i < 3; i++) expect(await qos1(pub, "orders/1", `${x}-offline-${i}`, i + 1)).toBe(0);
        pub.end();
        const back = await RawMqtt.open(gw.port("mqtt"), 5);
        const got = publishesOf(back);
        back.send({
          cmd: "connect",
          protocolId: "MQTT",
          protocolVersion: 5,
          clean: false,
          keepalive: 60,
          properties: { sessionExpiryInterval: 300 },
          ...login(x, `${x}-sub`),
        } as mqtt.Packet);
        expect(((await back.next("connack")) as mqtt.IConnackPacket).sessionPresent).toBe(true);
        await expect
          .poll(
            () =>
              got
                .payloads()
                .filter((p) => p.startsWith(`${x}-offline`))
                .sort(),
            { timeout: 10_000 },
          )
          .toEqual([0, 1, 2].map((i) => `${x}-offline-${i}`));
        expect(got.got.every((p) => p.qos === 1)).toBe(true);
        back.end();
      });

      it("retained messages: a new subscriber gets its account's, not the other's", async () => {
        const pub = await RawMqtt.connected(gw.port("mqtt"), 5, login(x, `${x}-retainer`));
        expect(await qos1(pub, "status/x", `${x}-retained`, 1, true)).toBe(0);
        pub.end();
        const reader = await RawMqtt.connected(gw.port("mqtt"), 5, login(x, `${x}-reader`));
        const got = publishesOf(reader);
        expect(await subscribe(reader, "status/#", 0)).toEqual([0]);
        await got.waitFor("status/x");
        expect(got.payloads()).toEqual([`${x}-retained`]);
        reader.end();
      });

      it("a will reaches its account", async () => {
        const w = await RawMqtt.connected(
          gw.port("mqtt"),
          5,
          login(x, `${x}-will`, {
            will: { topic: "wills/x", payload: Buffer.from(`${x}-will`), qos: 1, retain: false },
          } as Partial<mqtt.IConnectPacket>),
        );
        w.end();
        await watchers.get(x)!.waitFor("wills/x");
      });

      it("an AMQP receiver on the operator queue orders.>::q reads the account's stored messages", async () => {
        const a = await AmqpClient.open(gw.port("amqp"), { username: user(x), password: `${user(x)}-pw` });
        const rx = collect(await a.receiver({ source: { address: "orders.>::q" } }));
        const bodies = (await rx.take(3)).map((r) => bodyText(r.message)).sort();
        expect(bodies).toEqual([0, 1, 2].map((i) => `${x}-offline-${i}`));
        await a.close();
      });

      it("admin requests on the account scope see this account's clients alone", async () => {
        const list = (await operator.request(`$MQG.admin.account.${x}.list`, "", { timeout: 5_000 })).json<{
          clients: Array<{ account: string; client_id: string }>;
        }>();
        expect(list.clients.length).toBeGreaterThan(0);
        expect(new Set(list.clients.map((c) => c.account))).toEqual(new Set([x]));
        const info = (await operator.request(`$MQG.admin.account.${x}.info`, "", { timeout: 5_000 })).json<{
          accounts: Record<string, unknown>;
        }>();
        expect(Object.keys(info.accounts)).toEqual([x]);
      });
    });
  }

  it("neither account's watcher saw anything of the other's, and the gateway met no refusal", async () => {
    for (const x of ACCOUNTS) {
      const seen = watchers.get(x)!.payloads();
      expect(seen.filter((p) => p.startsWith(`${other(x)}-`))).toEqual([]);
      // It saw its own account's traffic: the live copies and the will.
      expect(seen).toContain(`${x}-will`);
      expect(seen).toContain(`${x}-offline-0`);
    }
    const trouble = gw.logs.filter((l) =>
      /Permissions Violation|binding skipped|stored delivery unavailable|could not/i.test(JSON.stringify(l)),
    );
    expect(trouble).toEqual([]);
  });
});
