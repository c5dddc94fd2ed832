// The generated permissions must be what a real nats-server accepts, and must let the
// gateway, its admin user and an operator do their work while clients stay out of $MQG.>.
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection, nkeys } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { natsServerPermissions } from "../../src/config/permissions.js";
import type { GatewayConfig } from "../../src/config/schema.js";
import { startGateway } from "../helpers/gateway.js";
import { connectCollecting, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, natsServerBinary, startNatsServer } from "../helpers/natsServer.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "mqgw-generate-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const FULL = `id: gw-eu-1
admin: { user: mqg-admin, password: "env:ADMIN_PW_FROM_ENV" }
gateway_users:
  PLANT_A: { user: mqg-a, password: "literal" }
  PLANT_B: { nkey_seed_file: /etc/mqg/b.nk }
mqtt:
  sessions_bucket: SESS
  retained_stream: RET
bindings:
  - { stream: ORDERS, account: PLANT_A }
  - { stream: EVENTS, account: PLANT_B }
routing:
  - { username: "c-*", account: PLANT_C }
`;

async function configFrom(yaml: string | undefined, flags = {}): Promise<GatewayConfig> {
  const file = yaml === undefined ? undefined : join(dir, `c${Math.random().toString(16).slice(2)}.yaml`);
  if (file !== undefined && yaml !== undefined) await writeFile(file, yaml);
  const result = await loadConfig({ file, flags, env: { ADMIN_PW_FROM_ENV: "x" } });
  if (!result.ok) throw new Error(result.problems.join("\n"));
  return result.config;
}

/** The $VARIABLES the header asks for, each given a value. */
function variables(text: string): Record<string, string> {
  return Object.fromEntries(
    [...text.matchAll(/^# {3}\$([A-Za-z_][A-Za-z0-9_]*)/gm)].map((m) => [m[1] as string, `pw-${m[1]}`]),
  );
}

/** `nats-server -c FILE -t`: parse and check the config without starting. */
function testConfig(text: string, env: Record<string, string>): { status: number | null; output: string } {
  const file = join(dir, `perm${Math.random().toString(16).slice(2)}.conf`);
  writeFileSync(file, text);
  const run = spawnSync(natsServerBinary(), ["-c", file, "-t"], {
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "", ...env },
  });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

describe("natsServerPermissions", () => {
  it("with defaults: parses with nats-server -t once its variables are set", async () => {
    const text = natsServerPermissions(await configFrom(undefined, { id: "gw-1" }));
    const env = variables(text);
    expect(Object.keys(env).sort()).toEqual([
      "MQG_ADMIN_PASSWORD",
      "MQG_GATEWAY_CLIENTS_PASSWORD",
      "MQG_OPERATOR_PASSWORD",
    ]);
    const ok = testConfig(text, env);
    expect(ok.output).toMatch(/is valid/);
    expect(ok.status).toBe(0);
    // Unset, a password is refused: nothing secret is baked into the text.
    const missing = testConfig(text, {});
    expect(missing.status).not.toBe(0);
    expect(missing.output).toMatch(/variable reference for 'MQG_ADMIN_PASSWORD'/);
  });

  it("with accounts, bindings and several kinds of credentials: parses with nats-server -t", async () => {
    await writeFile(join(dir, "b.nk"), "SUAxxx");
    const text = natsServerPermissions(
      await configFrom(FULL.replace("nkey_seed_file: /etc/mqg/b.nk", `nkey_seed_file: ${join(dir, "b.nk")}`)),
    );
    const env = { ...variables(text), MQG_GATEWAY_PLANT_B_NKEY: nkeys.createUser().getPublicKey() };
    const checked = testConfig(text, env);
    expect(checked.output).toMatch(/is valid/);
    // An env: secret keeps its own variable name; a literal one is never printed.
    expect(text).toContain("password: $ADMIN_PW_FROM_ENV");
    expect(text).not.toContain("literal");
    expect(text).toContain("nkey: $MQG_GATEWAY_PLANT_B_NKEY");
    for (const account of ["PLANT_A", "PLANT_B", "PLANT_C"]) expect(text).toContain(`"${account}" {`);
  });

  it("names the admin scopes, the gateway user's streams and the client deny", async () => {
    const text = natsServerPermissions(await configFrom("id: gw-eu-1\nbindings: [ { stream: ORDERS } ]\n"));
    for (const subject of [
      "$MQG.admin.server.gw-eu-1.>",
      "$MQG.admin.ping.>",
      "$MQG.admin.account.*.>",
      "$SYS.REQ.USER.INFO",
      "$MQG.admin.>",
      "$MQG.alive.*",
      "$JS.API.CONSUMER.PAUSE.ORDERS.*",
      "$JS.API.CONSUMER.INFO.ORDERS.*",
      "$KV.MQGW_SESSIONS.>",
      // Stored delivery on the bound stream, and the replies to the gateway's own requests.
      "$JS.API.STREAM.INFO.ORDERS",
      "$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.*",
      "$JS.API.CONSUMER.MSG.NEXT.ORDERS.*",
      "$JS.ACK.ORDERS.>",
      "$MQG.inbox.*.>",
    ]) {
      expect(text).toContain(`"${subject}"`);
    }
    expect(text).toMatch(/publish: \{ allow: \[">"\], deny: \["\$MQG\.>", "_INBOX\.MQGW\.>"\] \}/);
    expect(text).toMatch(/subscribe: \{ allow: \[">"\], deny: \["\$MQG\.>"\] \}/);
    expect(text.match(/allow_responses: true/g)).toHaveLength(2);
  });

  it("leaves the server scope open when the id is drawn at start", async () => {
    const text = natsServerPermissions(await configFrom(undefined));
    expect(text).toContain(`"$MQG.admin.server.*.>"`);
  });
});

describe("the generated permissions on a running nats-server", () => {
  let server: NatsServerHandle;
  const conns: NatsConnection[] = [];
  const pw = (name: string) => `pw-${name}`;
  const as = async (user: string, password: string, inboxPrefix?: string) => {
    const nc = await connect({ servers: server.url, user, pass: password, ...(inboxPrefix ? { inboxPrefix } : {}) });
    conns.push(nc);
    return nc;
  };

  beforeAll(async () => {
    const config = await configFrom("id: gw-live\nbindings: [ { stream: ORDERS } ]\n");
    const text = natsServerPermissions(config).replace(
      `# { user: "sensor-7", password: "..." }`,
      `{ user: "sensor-7", password: "sensor-pw" }`,
    );
    for (const [name, value] of Object.entries(variables(text))) process.env[name] = value;
    server = await startNatsServer({ config: text });
  });
  afterAll(async () => {
    await Promise.all(conns.map((nc) => nc.close().catch(() => undefined)));
    await server?.stop();
  });

  it("lets an operator ask every gateway's admin user and get its reply", async () => {
    const admin = await as("mqg-admin", pw("MQG_ADMIN_PASSWORD"));
    const sub = admin.subscribe("$MQG.admin.ping.>", { callback: (_e, msg) => msg.respond('{"id":"gw-live"}') });
    const server1 = admin.subscribe("$MQG.admin.server.gw-live.>", { callback: (_e, msg) => msg.respond("server") });
    await admin.flush();
    const operator = await as("mqg-operator", pw("MQG_OPERATOR_PASSWORD"));
    expect((await operator.request("$MQG.admin.ping.info", "", { timeout: 2000 })).string()).toBe('{"id":"gw-live"}');
    expect((await operator.request("$MQG.admin.server.gw-live.info", "", { timeout: 2000 })).string()).toBe("server");
    // The admin user learns its account name from NATS.
    const info = JSON.parse((await admin.request("$SYS.REQ.USER.INFO", "", { timeout: 2000 })).string()) as {
      data?: { account?: string };
    };
    expect(info.data?.account).toBe("MQG_ADMIN");
    sub.unsubscribe();
    server1.unsubscribe();
  });

  it("lets the gateway user keep its sessions bucket and retained stream, and answer liveness asks", async () => {
    // As the gateway connects its own users: replies under $MQG.inbox.<id>.
    const gw = await as("mqg-clients", pw("MQG_GATEWAY_CLIENTS_PASSWORD"), "$MQG.inbox.gw-live");
    const kv = await new Kvm(gw).create("MQGW_SESSIONS");
    await kv.put("client-1", "session");
    expect((await kv.get("client-1"))?.string()).toBe("session");
    const watched = await kv.watch({ key: "client-1" });
    for await (const entry of watched) {
      expect(entry.string()).toBe("session");
      break;
    }
    // The retained stream keeps its subjects under $MQG., where clients cannot write.
    const jsm = await jetstreamManager(gw);
    await jsm.streams.add({
      name: "MQGW_RETAINED",
      subjects: ["$MQG.retained.>"],
      max_msgs_per_subject: 1,
      allow_direct: true,
    });
    await jetstream(gw).publish("$MQG.retained.orders.eu", "last");
    // Read as the gateway reads it: a direct get.
    expect((await jsm.direct.getMessage("MQGW_RETAINED", { last_by_subj: "$MQG.retained.orders.eu" }))?.string()).toBe(
      "last",
    );
    const peer = await as("mqg-clients", pw("MQG_GATEWAY_CLIENTS_PASSWORD"), "$MQG.inbox.gw-peer");
    peer.subscribe("$MQG.alive.gw-live", { callback: (_e, msg) => msg.respond("alive") });
    await peer.flush();
    expect((await gw.request("$MQG.alive.gw-live", "", { timeout: 2000 })).string()).toBe("alive");
  });

  it("lets a gateway running as the generated gateway user keep QoS 1 messages for an offline session in the MQTT store", async () => {
    const gateway = await startGateway({
      nats: server.url,
      config: { gateway_users: { CLIENTS: { user: "mqg-clients", password: pw("MQG_GATEWAY_CLIENTS_PASSWORD") } } },
    });
    try {
      const login = { username: "sensor-7", password: "sensor-pw" };
      const sub = await connectMqtt(gateway.port("mqtt"), {
        ...login,
        protocolVersion: 5,
        clientId: "perm-away",
        clean: false,
        properties: { sessionExpiryInterval: 600 },
      });
      await sub.subscribeAsync("perm/+", { qos: 1 });
      await sub.endAsync();
      const pub = await connectMqtt(gateway.port("mqtt"), { ...login, protocolVersion: 5 });
      await pub.publishAsync("perm/1", "kept", { qos: 1 });
      await pub.endAsync();
      const { client: back, inbox } = await connectCollecting(gateway.port("mqtt"), {
        ...login,
        protocolVersion: 5,
        clientId: "perm-away",
        clean: false,
        properties: { sessionExpiryInterval: 600 },
        resubscribe: false,
      });
      expect(back.connack.sessionPresent).toBe(true);
      const [m] = await inbox.count(1);
      expect(m!.payload.toString()).toBe("kept");
      await back.endAsync();
      expect(gateway.logs.filter((l) => /no MQTT store|stored delivery unavailable/.test(String(l.msg)))).toEqual([]);
    } finally {
      await gateway.stop();
    }
  });

  it("keeps client users out of $MQG.>, and lets them use everything else", async () => {
    const client = await as("sensor-7", "sensor-pw");
    const sub = client.subscribe("orders.>");
    await client.flush();
    client.publish("orders.eu", "hello");
    const got = await (async () => {
      for await (const msg of sub) return msg.string();
    })();
    expect(got).toBe("hello");
    const denied = client.subscribe("$MQG.>");
    await expect(
      (async () => {
        for await (const _ of denied) return "message";
        return "closed";
      })(),
    ).rejects.toThrow(/Permissions Violation/i);
  });
});
