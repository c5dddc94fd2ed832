// Issue 22, item 9: a narrow client user (publish plant.> only, not in `routing`) in a
// multi-account setup made by `generate`: its QoS 1 and 2 publishes are acknowledged and
// kept for an offline persistent subscriber of its account, and the gateway knows it in
// its account (docs/decisions/client-account.md). Twice: on a nats-server that names the
// account at CONNECT, and through a proxy that hides it (an older server), where the
// gateway users' account connz tells it.
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server, connect as tcpConnect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { AmqpClient, rhea, send } from "../amqp/rheaClient.js";
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
// No routing: the gateway must learn every client's account from NATS.
const CONFIG = {
  admin: { user: "mqg-admin", password: "env:MQG_ADMIN_PASSWORD" },
  gateway_users: {
    PLANT_A: { user: "mqg-plant-a", password: "env:MQG_A_PASSWORD" },
    PLANT_B: { user: "mqg-plant-b", password: "env:MQG_B_PASSWORD" },
  },
};
const PLACEHOLDER = `# { user: "sensor-7", password: "..." }`;
const USERS = {
  PLANT_A: [
    `{ user: "narrow-a", password: "narrow-pw", permissions: { publish: ["plant.>"], subscribe: ["plant.>"] } }`,
    `{ user: "reader-a", password: "reader-pw" }`,
  ],
  PLANT_B: [`{ user: "reader-b", password: "reader-pw" }`],
};

/** `generate --format nats-server` with the client users where the text says they go, and nothing else (no system user). */
async function generated(): Promise<string> {
  const file = join(mkdtempSync(join(tmpdir(), "mqgw-narrow-")), "gateway.yaml");
  writeFileSync(file, stringify(CONFIG));
  const { stdout } = await run(process.execPath, [bin, "generate", "--format", "nats-server", "--config", file], {
    env: { ...process.env, ...SECRETS },
  });
  let text = stdout;
  for (const [account, users] of Object.entries(USERS)) {
    const at = text.indexOf(`"${account}" {`);
    const i = text.indexOf(PLACEHOLDER, at);
    text = `${text.slice(0, i)}${users.join("\n      ")}${text.slice(i + PLACEHOLDER.length)}`;
  }
  // An account the gateway has no user in, with one narrow user: nothing can tell its account.
  return text.replace(
    /^accounts \{$/m,
    `accounts {\n  PLANT_C { jetstream: enabled, users: [ { user: "narrow-c", password: "narrow-pw", permissions: { publish: ["plant.>"], subscribe: ["plant.>"] } } ] }`,
  );
}

/**
 * A TCP proxy to nats-server that takes `connect_info` and `remote_account` out of every
 * INFO it passes on: the server as one before 2.12 speaks.
 */
async function infoStrippingProxy(port: number): Promise<{ url: string; server: Server }> {
  const strip = (line: string) => {
    if (!line.startsWith("INFO {")) return line;
    try {
      const info = JSON.parse(line.slice(5)) as Record<string, unknown>;
      delete info.connect_info;
      delete info.remote_account;
      return `INFO ${JSON.stringify(info)}`;
    } catch {
      return line; // a message payload that happens to start so
    }
  };
  const server = createServer((down) => {
    const up = tcpConnect(port, "127.0.0.1");
    let rest = "";
    up.on("data", (chunk: Buffer) => {
      rest += chunk.toString("latin1");
      const lines = rest.split("\r\n");
      rest = lines.pop() ?? "";
      down.write(Buffer.from(lines.map((l) => `${strip(l)}\r\n`).join(""), "latin1"));
    });
    down.on("data", (d) => up.write(d));
    const end = () => {
      up.destroy();
      down.destroy();
    };
    up.on("close", end).on("error", end);
    down.on("close", end).on("error", end);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port: own } = server.address() as { port: number };
  return { url: `nats://127.0.0.1:${own}`, server };
}

const login = (user: string, clientId: string, extra: Partial<mqtt.IConnectPacket> = {}) => ({
  clientId,
  username: user,
  password: Buffer.from(user.startsWith("narrow") ? "narrow-pw" : "reader-pw"),
  ...extra,
});

describe("a narrow client user (publish plant.> only, no routing rule) in a multi-account setup", () => {
  let nats: NatsServerHandle;
  let proxy: { url: string; server: Server };
  const gateways: Record<string, GatewayHandle> = {};

  beforeAll(async () => {
    const text = await generated();
    for (const variable of text.matchAll(/^# {3}\$([A-Za-z_][A-Za-z0-9_]*)/gm)) {
      const key = variable[1] as string;
      process.env[key] = key in SECRETS ? SECRETS[key as keyof typeof SECRETS] : `pw-${key}`;
    }
    nats = await startNatsServer({ config: text });
    proxy = await infoStrippingProxy(nats.port);
    // debug: the line that says how each client's account was learnt.
    const config = { ...CONFIG, log: { level: "debug", format: "json" } };
    gateways.named = await startGateway({ nats: nats.url, config: { ...config, id: "gw-named" }, env: SECRETS });
    gateways.asked = await startGateway({ nats: proxy.url, config: { ...config, id: "gw-asked" }, env: SECRETS });
  });
  afterAll(async () => {
    for (const gw of Object.values(gateways)) await gw.stop();
    proxy?.server.close();
    await nats?.stop();
  });

  const ways = [
    ["named", "nats-server names the account at CONNECT", "connect_info"],
    ["asked", "the server does not name it: the gateway users' account connz", "account_connz"],
  ] as const;
  describe.each(ways)("%s: %s", (way, _what, via) => {
    it.each([5, 4] as const)(
      "MQTT %s: QoS 1 and 2 publishes (and an AMQP transfer of the same user) acknowledged and kept for an offline persistent subscriber of its account",
      async (version) => {
        const gw = gateways[way]!;
        const tag = `${way}${version}`;
        const persistent =
          version === 5 ? { clean: false, properties: { sessionExpiryInterval: 300 } } : { clean: false };
        // A persistent subscriber of PLANT_A, and one of PLANT_B on the same topics, both away.
        for (const reader of ["reader-a", "reader-b"]) {
          const sub = await RawMqtt.connected(gw.port("mqtt"), version, login(reader, `${tag}-${reader}`, persistent));
          sub.send({
            cmd: "subscribe",
            messageId: 1,
            subscriptions: [{ topic: `plant/${tag}/#`, qos: 2 }],
          } as mqtt.Packet);
          expect(((await sub.next("suback")) as mqtt.ISubackPacket).granted).toEqual([2]);
          sub.end();
          await sub.waitClosed();
        }

        const pub = await RawMqtt.connected(gw.port("mqtt"), version, login("narrow-a", `${tag}-narrow`));
        const page = (await (
          await fetch(`http://127.0.0.1:${gw.port("http")}/clients?client_id=${tag}-narrow`)
        ).json()) as {
          clients: Array<{ account: string }>;
        };
        expect(page.clients.map((c) => c.account)).toEqual(["PLANT_A"]);
        // How it was learnt (the log line is read from stderr, which may trail the socket).
        const learnt = await gw.waitForLog((l) => l.msg === "client account learnt" && l.user === "narrow-a");
        expect([learnt.account, learnt.via]).toEqual(["PLANT_A", via]);
        for (let i = 1; i <= 3; i++) {
          pub.send({
            cmd: "publish",
            topic: `plant/${tag}/line`,
            payload: Buffer.from(`q1-${i}`),
            qos: 1,
            messageId: i,
            retain: false,
            dup: false,
          } as mqtt.Packet);
          const ack = (await pub.next("puback", 10_000)) as mqtt.IPubackPacket;
          expect(ack.reasonCode ?? 0).toBe(0);
        }
        pub.send({
          cmd: "publish",
          topic: `plant/${tag}/line`,
          payload: Buffer.from("q2-1"),
          qos: 2,
          messageId: 4,
          retain: false,
          dup: false,
        } as mqtt.Packet);
        expect(((await pub.next("pubrec", 10_000)) as mqtt.IPubrecPacket).reasonCode ?? 0).toBe(0);
        pub.send({ cmd: "pubrel", messageId: 4 } as mqtt.Packet);
        await pub.next("pubcomp");
        expect(pub.closed).toBe(false);
        pub.end();
        // The same user over AMQP: an unsettled transfer is accepted and kept.
        const amqp = await AmqpClient.open(gw.port("amqp"), { username: "narrow-a", password: "narrow-pw" });
        const sender = await amqp.sender({ target: { address: `plant.${tag}.line` } });
        expect(await send(sender, { body: rhea.message.data_section(Buffer.from("amqp-1")) })).toEqual({
          state: "accepted",
        });
        amqp.conn.close();

        const resume = async (reader: string) => {
          const back = await RawMqtt.open(gw.port("mqtt"), version);
          const got = publishesOf(back);
          back.send({
            cmd: "connect",
            protocolId: "MQTT",
            protocolVersion: version,
            keepalive: 60,
            ...login(reader, `${tag}-${reader}`, persistent),
          } as mqtt.Packet);
          expect(((await back.next("connack")) as mqtt.IConnackPacket).sessionPresent).toBe(true);
          return { back, got };
        };
        const a = await resume("reader-a");
        await expect
          .poll(() => a.got.payloads(), { timeout: 10_000 })
          .toEqual(["q1-1", "q1-2", "q1-3", "q2-1", "amqp-1"]);
        // The other account's subscriber of the same topic: only its own account's message,
        // published after A's (anything of A's kept in B's account would come before it).
        const b = await resume("reader-b");
        const other = await RawMqtt.connected(gw.port("mqtt"), version, login("reader-b", `${tag}-b-pub`));
        other.send({
          cmd: "publish",
          topic: `plant/${tag}/line`,
          payload: Buffer.from("b-1"),
          qos: 1,
          messageId: 1,
          retain: false,
          dup: false,
        } as mqtt.Packet);
        expect(((await other.next("puback")) as mqtt.IPubackPacket).reasonCode ?? 0).toBe(0);
        other.end();
        await expect.poll(() => b.got.payloads(), { timeout: 10_000 }).toContain("b-1");
        expect(b.got.payloads()).toEqual(["b-1"]);
        a.back.end();
        b.back.end();
        expect(gw.logs.filter((l) => String(l.msg).includes("account of this user is unknown"))).toEqual([]);
      },
      60_000,
    );
  });

  it("a user whose account nothing tells: its QoS 1 publish is refused with the reason, and the log says so once for the user", async () => {
    const gw = gateways.asked!;
    for (const n of [1, 2]) {
      const pub = await RawMqtt.connected(gw.port("mqtt"), 5, login("narrow-c", `unknown-${n}`));
      pub.send({
        cmd: "publish",
        topic: "plant/c/line",
        payload: Buffer.from("c"),
        qos: 1,
        messageId: 1,
        retain: false,
        dup: false,
      } as mqtt.Packet);
      const ack = (await pub.next("puback", 10_000)) as mqtt.IPubackPacket;
      expect(ack.reasonCode).toBe(0x80);
      pub.end();
      await pub.waitClosed();
    }
    await gw.waitForLog((l) => String(l.msg).includes("account of this user is unknown"));
    const said = gw.logs.filter((l) => String(l.msg).includes("account of this user is unknown"));
    expect(said.map((l) => l.user)).toEqual(["narrow-c"]);
  });
});
