// Issue 13, finding 7 (operator mode): nats-server with an operator, JWT accounts (A, B,
// an admin account) and a full resolver, users made as nsc would. End to end:
// `generate` gives the gateway users' and admin user's permissions (its nsc lines), which
// go into their JWTs; accounts are public keys in gateway_users, bindings, routing and
// the admin subjects; clients log in with a bearer user JWT as their password (as
// nats-server's own MQTT does). Then revocation: a user revoked in its account JWT, and
// an account whose JWT expires, end their MQTT (0x87) and AMQP (unauthorized-access)
// clients.
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { jetstreamManager } from "@nats-io/jetstream";
import type { User } from "@nats-io/jwt";
import { connect, credsAuthenticator, jwtAuthenticator, type NatsConnection } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { AmqpClient } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { publishesOf } from "../helpers/inbound.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { type OperatorUser, OperatorWorld } from "../helpers/operator.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const run = promisify(execFile);
const bin = join(import.meta.dirname, "../../bin/mq-gateway.js");

/** The nsc line generate prints for the user logging in with `credsFile`, as JWT permissions. */
function nscPermissions(text: string, credsFile: string): Partial<User> {
  const at = text.indexOf(`It logs in with ${credsFile} `);
  const line = text.slice(at).split("\n")[1] ?? "";
  const flag = (name: string) =>
    [...line.matchAll(new RegExp(`--${name} "([^"]*)"`, "g"))].flatMap((m) => m[1]!.split(","));
  return {
    pub: { allow: flag("allow-pub") },
    sub: { allow: flag("allow-sub") },
    ...(line.includes("--allow-pub-response") ? { resp: { max: 1, ttl: 0 } } : {}),
  };
}

/** The client permissions generate prints (MQG_CLIENT_PERMISSIONS), as JWT permissions. */
function clientPermissions(text: string): Partial<User> {
  const block = text.slice(text.indexOf("MQG_CLIENT_PERMISSIONS = {"));
  const list = (direction: string, which: string) =>
    JSON.parse(new RegExp(`${direction}: \\{[^}]*${which}: (\\[[^\\]]*\\])`).exec(block)![1]!) as string[];
  return {
    pub: { allow: list("publish", "allow"), deny: list("publish", "deny") },
    sub: { allow: list("subscribe", "allow"), deny: list("subscribe", "deny") },
  };
}

describe("operator mode end to end", () => {
  let world: OperatorWorld;
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let sys: NatsConnection;
  let operator: NatsConnection;
  let A: string;
  let B: string;
  const clients = new Map<string, OperatorUser>();

  beforeAll(async () => {
    world = await OperatorWorld.create(["A", "B", "ADM"], ["A", "B"]);
    A = world.account("A").pub;
    B = world.account("B").pub;
    // The gateway's users first with no permissions: generate reads the config, whose creds files must exist.
    const gwA = await world.user("A", "mqg-a");
    const gwB = await world.user("B", "mqg-b");
    const admin = await world.user("ADM", "mqg-admin");
    const config = {
      id: "gw-op",
      admin: { creds_file: admin.credsFile },
      gateway_users: { [A]: { creds_file: gwA.credsFile }, [B]: { creds_file: gwB.credsFile } },
      routing: [{ username: "b-*", account: B }],
      bindings: [{ stream: "ORDERS", account: A }],
    };
    const file = join(mkdtempSync(join(tmpdir(), "mqgw-op-cfg-")), "gateway.yaml");
    writeFileSync(file, stringify(config));
    const { stdout } = await run(process.execPath, [bin, "generate", "--format", "nats-server", "--config", file]);
    // Each of the gateway's users again, in its own file, with what generate says it needs.
    const regrant = async (account: string, name: string, user: OperatorUser) => {
      const granted = await world.user(account, name, nscPermissions(stdout, user.credsFile));
      writeFileSync(user.credsFile, granted.creds);
    };
    await regrant("A", "mqg-a", gwA);
    await regrant("B", "mqg-b", gwB);
    await regrant("ADM", "mqg-admin", admin);
    const perms = clientPermissions(stdout);
    for (const [account, name] of [
      ["A", "a-1"],
      ["A", "a-2"],
      ["B", "b-1"],
      ["B", "b-2"],
    ] as const) {
      clients.set(name, await world.user(account, name, { ...perms, bearer_token: true }));
    }
    // An operator in the admin account, with generate's operator permissions.
    const op = await world.user("ADM", "mqg-operator", {
      pub: { allow: ["$MQG.admin.>"] },
      sub: { allow: ["_INBOX.>"] },
    });

    nats = await startNatsServer({ config: world.serverConfig() });
    sys = await world.systemConnection(nats.url);
    operator = await connect({ servers: nats.url, authenticator: credsAuthenticator(op.creds) });
    const a1 = await connect({ servers: nats.url, authenticator: jwtAuthenticator(clients.get("a-1")!.jwt) });
    await (await jetstreamManager(a1)).streams.add({ name: "ORDERS", subjects: ["orders.>"] });
    await a1.close();
    gw = await startGateway({ nats: nats.url, config: { ...config, log: { level: "info", format: "json" } } });
    await gw.waitForLog((l) => l.msg === "admin connection serving the admin subjects");
  });
  afterAll(async () => {
    await operator?.close();
    await sys?.close();
    await gw?.stop();
    await nats?.stop();
  });

  const login = (name: string, extra: Partial<mqtt.IConnectPacket> = {}) => ({
    clientId: name,
    username: name,
    password: Buffer.from(clients.get(name)!.jwt),
    ...extra,
  });

  it("a client logs in with its bearer JWT; a persistent QoS 1 subscriber in account A (by public key) gets what it missed", async () => {
    const sub = await RawMqtt.connected(
      gw.port("mqtt"),
      5,
      login("a-2", { clean: false, properties: { sessionExpiryInterval: 300 } }),
    );
    sub.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "orders/+", qos: 1 }] } as mqtt.Packet);
    expect(((await sub.next("suback")) as mqtt.ISubackPacket).granted).toEqual([1]);
    sub.end();
    await sub.waitClosed();
    const pub = await RawMqtt.connected(gw.port("mqtt"), 5, login("a-1"));
    pub.send({
      cmd: "publish",
      topic: "orders/1",
      payload: Buffer.from("missed"),
      qos: 1,
      messageId: 1,
      retain: false,
      dup: false,
    } as mqtt.Packet);
    expect(((await pub.next("puback")) as mqtt.IPubackPacket).reasonCode ?? 0).toBe(0);
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
      ...login("a-2"),
    } as mqtt.Packet);
    expect(((await back.next("connack")) as mqtt.IConnackPacket).sessionPresent).toBe(true);
    await got.waitFor("orders/1");
    back.end();
  });

  it("admin subjects name accounts by public key; routing by public key puts b-1 in B", async () => {
    const b = await RawMqtt.connected(gw.port("mqtt"), 5, login("b-1"));
    const a = await RawMqtt.connected(gw.port("mqtt"), 5, login("a-1"));
    const listA = (await operator.request(`$MQG.admin.account.${A}.list`, "", { timeout: 5_000 })).json<{
      clients: Array<{ account: string; client_id: string }>;
    }>();
    expect(listA.clients.map((c) => [c.account, c.client_id])).toEqual([[A, "a-1"]]);
    const listB = (await operator.request(`$MQG.admin.account.${B}.list`, "", { timeout: 5_000 })).json<{
      clients: Array<{ account: string; client_id: string }>;
    }>();
    expect(listB.clients.map((c) => [c.account, c.client_id])).toEqual([[B, "b-1"]]);
    const info = (await operator.request("$MQG.admin.ping.info", "", { timeout: 5_000 })).json<{
      accounts: Record<string, unknown>;
    }>();
    expect(Object.keys(info.accounts).sort()).toEqual([A, B].sort());
    a.end();
    b.end();
  });

  it("a user revoked in its account JWT: its MQTT 5 client gets 0x87, its AMQP connection amqp:unauthorized-access, its next login is refused", async () => {
    const m = await RawMqtt.connected(gw.port("mqtt"), 5, login("a-1"));
    const amqp = await AmqpClient.open(gw.port("amqp"), { username: "a-1", password: clients.get("a-1")!.jwt });
    const amqpClosed = amqp.closed(15_000);
    const other = await RawMqtt.connected(gw.port("mqtt"), 5, login("a-2"));
    await world.push(sys, "A", (claims) => {
      claims.revocations = { ...claims.revocations, [clients.get("a-1")!.pub]: Math.floor(Date.now() / 1000) + 1 };
    });
    expect(((await m.next("disconnect", 10_000)) as mqtt.IDisconnectPacket).reasonCode).toBe(0x87);
    expect(await amqpClosed).toMatchObject({ condition: "amqp:unauthorized-access" });
    const again = await RawMqtt.open(gw.port("mqtt"), 5);
    again.send({
      cmd: "connect",
      protocolId: "MQTT",
      protocolVersion: 5,
      clean: true,
      keepalive: 60,
      ...login("a-1"),
    } as mqtt.Packet);
    expect([0x86, 0x87]).toContain(((await again.next("connack")) as mqtt.IConnackPacket).reasonCode);
    // Another user of the account is not affected.
    other.send({ cmd: "pingreq" } as mqtt.Packet);
    await other.next("pingresp");
    other.end();
  });

  it("an account whose JWT expires: its clients are closed (0x87), the other account's stay", async () => {
    const b = await RawMqtt.connected(gw.port("mqtt"), 5, login("b-2"));
    const a = await RawMqtt.connected(gw.port("mqtt"), 5, login("a-2"));
    await world.push(sys, "B", () => {}, Math.floor(Date.now() / 1000) + 2);
    expect(((await b.next("disconnect", 15_000)) as mqtt.IDisconnectPacket).reasonCode).toBe(0x87);
    a.send({ cmd: "pingreq" } as mqtt.Packet);
    await a.next("pingresp");
    a.end();
  });

  it("the gateway met no refusal on generate's permissions", () => {
    expect(
      gw.logs.filter((l) =>
        /Permissions Violation|binding skipped|stored delivery unavailable|could not/i.test(JSON.stringify(l)),
      ),
    ).toEqual([]);
  });
});
