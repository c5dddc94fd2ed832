// `mq-gateway ctl` as an operator runs it: the built CLI as a child process against real
// gateways, on the embedded nats-server (its admin.yaml) and on a NATS with accounts
// (the config's admin user, with the permissions `generate` prints).
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { FLEET_CONFIG, HAND_WRITTEN_SERVER, SECRETS, startWorld, type World } from "../admin/world.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { connectMqtt } from "../helpers/mqttClient.js";
import { natsServerBinary } from "../helpers/natsServer.js";
import { freePort } from "../helpers/ports.js";

const bin = join(import.meta.dirname, "../../bin/mq-gateway.js");

function ctl(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, [bin, "ctl", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  let stdout = "";
  let stderr = "";
  proc.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  proc.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  const timer = setTimeout(() => proc.kill("SIGKILL"), 20_000);
  return new Promise((resolve) =>
    proc.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}

const rows = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .map((l) => l.split(/\s{2,}/));

describe("ctl on the embedded nats-server (no config: the data directory's admin.yaml)", () => {
  let gw: GatewayHandle;
  let data: string[];

  beforeAll(async () => {
    gw = await startGateway({
      config: { nats: { embedded_listen: `127.0.0.1:${await freePort()}` }, ldm: { duration: "1s" } },
      env: { NATS_SERVER_BIN: natsServerBinary() },
    });
    await gw.waitForLog((l) => l.msg === "admin connection serving the admin subjects");
    data = ["--data", gw.dataDir];
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it("info: the gateway's id, version and clients per account, as a table", async () => {
    const client = await connectMqtt(gw.port("mqtt"), { clientId: "info-1" });
    try {
      const result = await ctl(["info", ...data]);
      expect(result).toMatchObject({ code: 0, stderr: "" });
      const [header, row] = rows(result.stdout);
      expect(header).toEqual(["GATEWAY", "VERSION", "SINCE", "ACCOUNT", "MQTT", "AMQP"]);
      expect(row).toEqual([gw.id, expect.any(String), expect.stringMatching(/^\d{4}-\d\d-\d\dT/), "CLIENTS", "1", "0"]);
    } finally {
      client.end(true);
    }
  });

  it("clients: a table or JSON, filtered by client id and account", async () => {
    const a = await connectMqtt(gw.port("mqtt"), { clientId: "sensor-7" });
    // Any username works on the embedded server: it authenticates nobody.
    const b = await connectMqtt(gw.port("mqtt"), { clientId: "sensor-8", username: "bob", password: "anything" });
    try {
      const all = await ctl(["clients", ...data]);
      expect(all.code).toBe(0);
      const table = rows(all.stdout);
      expect(table[0]).toEqual([
        "GATEWAY",
        "CID",
        "PROTOCOL",
        "ACCOUNT",
        "CLIENT ID",
        "REMOTE",
        "SINCE",
        "NATS SERVER",
      ]);
      expect(table.slice(1, -1).map((r) => r[4])).toEqual(["sensor-7", "sensor-8"]);
      expect(all.stdout).toMatch(/^2 clients on 1 gateway$/m);

      const one = await ctl(["clients", "--client-id", "sensor-8", "--json", ...data]);
      const replies = JSON.parse(one.stdout) as Array<{
        id: string;
        count: number;
        clients: Array<Record<string, unknown>>;
      }>;
      expect(replies).toEqual([
        {
          id: gw.id,
          count: 1,
          truncated: false,
          clients: [expect.objectContaining({ client_id: "sensor-8", account: "CLIENTS", protocol: "mqtt" })],
        },
      ]);
      const other = await ctl(["clients", "--account", "NOBODY", ...data]);
      expect(other.stdout).toMatch(/^0 clients on 1 gateway$/m);
    } finally {
      a.end(true);
      b.end(true);
    }
  });

  it("kick by client id: the MQTT 5 client gets DISCONNECT 0x98; an unknown id is exit 1 with one line", async () => {
    const client = await connectMqtt(gw.port("mqtt"), { clientId: "kick-me", protocolVersion: 5 });
    const disconnect = new Promise<number | undefined>((resolve) =>
      client.once("disconnect", (p) => resolve(p.reasonCode)),
    );
    const result = await ctl(["kick", "kick-me", ...data]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`^kicked kick-me \\(cid \\d+\\) on gateway ${gw.id}\\n$`));
    expect(await disconnect).toBe(0x98);
    client.end(true);

    const unknown = await ctl(["kick", "nobody-here", ...data]);
    expect(unknown).toEqual({
      code: 1,
      stdout: "",
      stderr: "mq-gateway ctl: no client nobody-here on any gateway that answered\n",
    });
  });

  it("kick with --account goes to the account scope", async () => {
    const client = await connectMqtt(gw.port("mqtt"), { clientId: "kick-acc" });
    const closed = new Promise<void>((resolve) => client.once("close", () => resolve()));
    const result = await ctl(["kick", "kick-acc", "--account", "CLIENTS", ...data]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("kicked kick-acc");
    await closed;
  });

  it("ban and sessions on the embedded nats-server: its admin account keeps the bans bucket", async () => {
    expect((await ctl(["ban", "embedded-bad", ...data])).code).toBe(0);
    await expect(connectMqtt(gw.port("mqtt"), { clientId: "embedded-bad", protocolVersion: 5 })).rejects.toMatchObject({
      code: 0x8a,
    });
    expect((await ctl(["bans", ...data])).stdout).toMatch(/^client_id\s+embedded-bad\s+\d{4}-/m);
    expect((await ctl(["unban", "embedded-bad", ...data])).code).toBe(0);
    const client = await connectMqtt(gw.port("mqtt"), {
      clientId: "embedded-bad",
      clean: false,
      properties: { sessionExpiryInterval: 60 },
      protocolVersion: 5,
    });
    await client.subscribeAsync("e/#", { qos: 1 });
    client.end(true);
    // The single account needs no --account.
    const listed = await ctl(["sessions", "--client-id", "embedded-bad", ...data]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(/^embedded-bad\s+/m);
    expect((await ctl(["sessions", "drop", "embedded-bad", ...data])).code).toBe(0);
  });

  it("without admin.yaml it says where it looked and what to give instead, exit 2", async () => {
    const result = await ctl(["info", "--data", mkdtempSync(join(tmpdir(), "mqgw-nodata-"))]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^mq-gateway ctl: no admin credentials: .*admin\.yaml is not there/);
  });

  it("rebalance: the gateway's answer in one line, or --json; a refusal is exit 1", async () => {
    const client = await connectMqtt(gw.port("mqtt"), { clientId: "move-me" });
    try {
      // Moving to where every connection is already: refused, in one line.
      const server = String((await gw.waitForLog((l) => l.msg === "connected to NATS")).server_name);
      const refused = await ctl(["rebalance", "--account", "CLIENTS", "--to", server, ...data]);
      expect(refused).toEqual({
        code: 1,
        stdout: "",
        stderr: `mq-gateway ctl: gateway ${gw.id}: rebalance not started: every NATS connection of account CLIENTS is on ${server} already\n`,
      });
      // Elsewhere: started (the gateway stops it when the first move does not land there).
      const started = await ctl([
        "rebalance",
        "--account",
        "CLIENTS",
        "--to",
        "nats-elsewhere",
        "--over",
        "1s",
        "--json",
        ...data,
      ]);
      expect(started.code, started.stderr).toBe(0);
      expect(JSON.parse(started.stdout)).toMatchObject({ started: true, server: "nats-elsewhere" });
      const malformed = await ctl(["rebalance", "--account", "CLIENTS", "--to", "x", "--max", "0", ...data]);
      expect(malformed.code).toBe(1);
      expect(malformed.stderr).toMatch(new RegExp(`^mq-gateway ctl: gateway ${gw.id}: `));
    } finally {
      client.end(true);
    }
  });

  it("ldm: the only gateway goes into lame duck mode and stops with exit 0", async () => {
    const result = await ctl(["ldm", ...data]);
    expect(result).toMatchObject({
      code: 0,
      stdout: `gateway ${gw.id}: lame duck mode started (it stops once its clients are gone)\n`,
    });
    expect(await gw.stop("SIGCONT")).toBe(0);
  });
});

describe("ctl on a NATS with accounts (--config: nats.servers and the admin user)", () => {
  let world: World;
  let config: string;

  beforeAll(async () => {
    // The hand-written admin user, given what `generate` now grants it: sending admin requests.
    world = await startWorld(
      HAND_WRITTEN_SERVER.replace('publish: ["$SYS.REQ.USER.INFO"]', 'publish: ["$SYS.REQ.USER.INFO", "$MQG.admin.>"]'),
    );
    const dir = mkdtempSync(join(tmpdir(), "mqgw-ctl-"));
    config = join(dir, "gateway.yaml");
    writeFileSync(config, stringify({ ...FLEET_CONFIG, nats: { servers: [world.nats.url] } }));
  });
  afterAll(async () => {
    await world?.close();
  });

  it("info lists both gateways, and --gateway one of them", async () => {
    const both = await ctl(["info", "--config", config], SECRETS);
    expect(both.code).toBe(0);
    expect([
      ...new Set(
        rows(both.stdout)
          .slice(1)
          .map((r) => r[0]),
      ),
    ]).toEqual(["gw-a", "gw-b"]);
    const one = await ctl(["info", "--config", config, "--gateway", "gw-b", "--json"], SECRETS);
    expect(JSON.parse(one.stdout)).toEqual([expect.objectContaining({ id: "gw-b" })]);
  });

  it("ldm without --gateway refuses to guess between two gateways", async () => {
    const result = await ctl(["ldm", "--config", config], SECRETS);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe("mq-gateway ctl: 2 gateways answered (gw-a, gw-b): say which with --gateway ID\n");
  });

  it("flags instead of a config: --server with --user/--password", async () => {
    const result = await ctl(
      ["info", "--server", world.nats.url, "--user", "mqg-operator", "--password", "env:OP_PW"],
      {
        OP_PW: SECRETS.MQG_OPERATOR_PASSWORD,
      },
    );
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("gw-a");
  });

  it("a refused login is one line, exit 2", async () => {
    const result = await ctl(["info", "--server", world.nats.url, "--user", "mqg-operator", "--password", "wrong"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^mq-gateway ctl: NATS at .* refused the admin user from the flags: /);
  });
});
