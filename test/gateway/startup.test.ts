// Start-up as an operator meets it: a port already taken names the port, the key and the
// flag that move it, in one plain line, exit 2; a listener open to other machines in front
// of the embedded nats-server (no auth) is warned about.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { EXIT_GRACE_MS } from "../../src/gateway/runToExit.js";
import { startEmbeddedGateway, startGateway } from "../helpers/gateway.js";
import { natsServerBinary, startNatsServer } from "../helpers/natsServer.js";
import { freePort } from "../helpers/ports.js";

const bin = join(import.meta.dirname, "../../bin/mq-gateway.js");

/** Runs the gateway until it exits by itself; its exit code, stderr, and how long it lived on after its first plain stderr line. */
function runUntilExit(
  config: Record<string, unknown>,
  args: string[] = [],
): Promise<{ code: number | null; stderr: string; lingeredMs: number }> {
  const dir = mkdtempSync(join(tmpdir(), "mqgw-start-"));
  const file = join(dir, "gateway.yaml");
  writeFileSync(file, stringify({ log: { level: "info" }, ...config }));
  const proc = spawn(process.execPath, [bin, "run", "--config", file, "--data", join(dir, "data"), ...args], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, NATS_SERVER_BIN: natsServerBinary() },
  });
  let stderr = "";
  let saidAt: number | undefined;
  proc.stderr.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
    if (saidAt === undefined && plainLines(stderr).length > 0) saidAt = Date.now();
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 40_000);
  return new Promise((resolve) =>
    proc.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, lingeredMs: Date.now() - (saidAt ?? 0) });
    }),
  );
}

/** The lines of stderr that are not JSON log lines: what a person reads. */
const plainLines = (stderr: string) => stderr.split("\n").filter((l) => l.trim() !== "" && !l.startsWith("{"));

async function holdPort(): Promise<{ port: number; server: Server }> {
  const server = createServer().listen(0, "127.0.0.1");
  await new Promise((r) => server.once("listening", r));
  return { port: (server.address() as { port: number }).port, server };
}

describe("a port already in use", () => {
  let nats: Awaited<ReturnType<typeof startNatsServer>>;
  beforeAll(async () => {
    nats = await startNatsServer();
  });
  afterAll(async () => {
    await nats?.stop();
  });

  const cases = [
    { name: "MQTT", key: "mqtt.listen", flag: "--mqtt", config: (at: string) => ({ mqtt: { listen: at } }) },
    { name: "AMQP", key: "amqp.listen", flag: "--amqp", config: (at: string) => ({ amqp: { listen: at } }) },
    { name: "HTTP", key: "http.listen", flag: "--http", config: (at: string) => ({ http: { listen: at } }) },
  ];
  for (const c of cases) {
    it(`${c.name}: one plain line with the port, ${c.key} and ${c.flag}; exit 2`, async () => {
      const held = await holdPort();
      const others = {
        mqtt: { listen: "127.0.0.1:0" },
        amqp: { listen: "127.0.0.1:0" },
        http: { listen: "127.0.0.1:0" },
      };
      const result = await runUntilExit({
        ...others,
        ...c.config(`127.0.0.1:${held.port}`),
        nats: { servers: [nats.url] },
      });
      held.server.close();
      expect(result.code).toBe(2);
      // Issue 22: it exits once it has said so, not 20 s later (runToExit.ts, EXIT_GRACE_MS).
      expect(result.lingeredMs).toBeLessThan(EXIT_GRACE_MS + 3_000);
      const lines = plainLines(result.stderr);
      expect(lines).toEqual([
        `mq-gateway: port ${held.port} (${c.name}, 127.0.0.1:${held.port}) is in use: move it with ${c.key} or ${c.flag}, or stop what holds it`,
      ]);
      expect(result.stderr).not.toMatch(/Cause\(|Fail\(|\n\s+at /);
    });
  }

  it("the embedded nats-server's port: names nats.embedded_listen and --nats-listen, and the --nats that would use it", async () => {
    const natsPort = nats.port;
    const result = await runUntilExit({
      mqtt: { listen: "127.0.0.1:0" },
      amqp: { listen: "127.0.0.1:0" },
      http: { listen: "127.0.0.1:0" },
      nats: { embedded_listen: `127.0.0.1:${natsPort}` },
    });
    expect(result.code).toBe(2);
    expect(result.lingeredMs).toBeLessThan(EXIT_GRACE_MS + 3_000);
    expect(plainLines(result.stderr)).toEqual([
      `mq-gateway: port ${natsPort} (the embedded nats-server, 127.0.0.1:${natsPort}) is in use, perhaps by another nats-server: move it with nats.embedded_listen or --nats-listen, or use that server with --nats nats://127.0.0.1:${natsPort}`,
    ]);
  });

  it("the embedded nats-server up, the MQTT port taken: exit 2 within moments of the line, not 20 s later", async () => {
    const held = await holdPort();
    const result = await runUntilExit({
      mqtt: { listen: `127.0.0.1:${held.port}` },
      amqp: { listen: "127.0.0.1:0" },
      http: { listen: "127.0.0.1:0" },
      nats: { embedded_listen: `127.0.0.1:${await freePort()}` },
    });
    held.server.close();
    expect(result.code).toBe(2);
    expect(result.lingeredMs).toBeLessThan(EXIT_GRACE_MS + 3_000);
    expect(plainLines(result.stderr)).toEqual([
      `mq-gateway: port ${held.port} (MQTT, 127.0.0.1:${held.port}) is in use: move it with mqtt.listen or --mqtt, or stop what holds it`,
    ]);
  });

  it("--nats-listen moves the embedded nats-server off the taken port, and the gateway starts", async () => {
    const natsPort = await freePort();
    const gw = await startGateway({
      config: { nats: { embedded_listen: `127.0.0.1:${nats.port}` } },
      args: ["--nats-listen", `127.0.0.1:${natsPort}`],
      env: { NATS_SERVER_BIN: natsServerBinary() },
    });
    try {
      const ready = await gw.waitForLog((l) => l.msg === "embedded nats-server ready");
      expect(ready.url).toBe(`nats://127.0.0.1:${natsPort}`);
    } finally {
      await gw.stop();
    }
  });

  it("NATS that cannot be reached: one plain line naming the servers, exit 2", async () => {
    const port = await freePort();
    const result = await runUntilExit({ mqtt: { listen: "127.0.0.1:0" }, amqp: { listen: "" }, http: { listen: "" } }, [
      "--nats",
      `nats://127.0.0.1:${port}`,
    ]);
    expect(result.code).toBe(2);
    expect(plainLines(result.stderr)).toEqual([
      expect.stringMatching(
        new RegExp(
          `^mq-gateway: cannot reach NATS at nats://127\\.0\\.0\\.1:${port}: .*is nats-server running there\\?`,
        ),
      ),
    ]);
    expect(result.stderr).not.toMatch(/Cause\(/);
  });
});

describe("NATS that refuses the gateway's credentials", () => {
  let nats: Awaited<ReturnType<typeof startNatsServer>>;
  beforeAll(async () => {
    nats = await startNatsServer({ config: 'authorization { users = [ { user: mqg, password: "right-secret" } ] }\n' });
  });
  afterAll(async () => {
    await nats?.stop();
  });
  const off = { mqtt: { listen: "127.0.0.1:0" }, amqp: { listen: "" }, http: { listen: "" } };

  it("a wrong password: names gateway_users and the user, never the secret nor 'is nats-server running'; exit 2", async () => {
    const result = await runUntilExit({
      ...off,
      nats: { servers: [nats.url] },
      gateway_users: { PLANT_A: { user: "mqg", password: "wrong-secret" } },
    });
    expect(result.code).toBe(2);
    const lines = plainLines(result.stderr);
    expect(lines).toEqual([
      `mq-gateway: NATS at ${nats.url} refused the credentials of gateway_users.PLANT_A (user "mqg" with a password): Authorization Violation; check gateway_users.PLANT_A against the users nats-server knows`,
    ]);
    expect(result.stderr).not.toContain("running there");
    expect(result.stderr).not.toContain("wrong-secret");
  });

  it("no credentials at all: says NATS requires a user and names gateway_users", async () => {
    const result = await runUntilExit({ ...off, nats: { servers: [nats.url] } });
    expect(result.code).toBe(2);
    expect(plainLines(result.stderr)).toEqual([
      expect.stringMatching(/^mq-gateway: NATS at \S+ refused a connection without credentials .*set gateway_users/),
    ]);
    expect(result.stderr).not.toContain("running there");
  });
});

describe("listeners open to other machines in front of the embedded nats-server", () => {
  const warned = (logs: Array<Record<string, unknown>>) =>
    logs.filter((l) => l.level === 40 && String(l.msg).startsWith("listeners reachable from other machines"));

  it("warns at start, naming each listener that is not on loopback", async () => {
    const gw = await startGateway({
      config: { mqtt: { listen: "0.0.0.0:0" }, nats: { embedded_listen: `127.0.0.1:${await freePort()}` } },
      env: { NATS_SERVER_BIN: natsServerBinary() },
    });
    try {
      const warning = await gw.waitForLog((l) => warned([l]).length > 0);
      expect(warning?.exposed).toEqual([expect.stringMatching(/^mqtt 0\.0\.0\.0:0$/)]);
      expect(String(warning?.msg)).toMatch(/set nats\.servers to a NATS that authenticates clients/);
    } finally {
      await gw.stop();
    }
  });

  it("says nothing when every listener is on loopback, or when NATS is the operator's", async () => {
    const embedded = await startGateway({
      config: { nats: { embedded_listen: `127.0.0.1:${await freePort()}` } },
      env: { NATS_SERVER_BIN: natsServerBinary() },
    });
    const nats = await startNatsServer();
    const external = await startGateway({ nats: nats.url, config: { mqtt: { listen: "0.0.0.0:0" } } });
    // Stopped first: every line logged at start has arrived once "stopped" has.
    await Promise.all([embedded.stop(), external.stop()]);
    await nats.stop();
    expect(embedded.logs.at(-1)?.msg).toBe("mq-gateway stopped");
    expect(warned(embedded.logs)).toEqual([]);
    expect(warned(external.logs)).toEqual([]);
  });
});

describe("a clean stop", () => {
  it("logs mq-gateway stopped with the exit code", async () => {
    const nats = await startNatsServer();
    const gw = await startGateway({ nats: nats.url });
    try {
      expect(await gw.stop("SIGTERM")).toBe(0);
      expect(gw.logs.at(-1)).toMatchObject({ msg: "mq-gateway stopped", exit_code: 0, id: gw.id });
    } finally {
      await nats.stop();
    }
  });

  it("with the embedded nats-server: its admin connection going is expected then, not a warning", async () => {
    const gw = await startEmbeddedGateway();
    await gw.waitForLog((l) => l.msg === "admin connection serving the admin subjects");
    expect(await gw.stop("SIGTERM")).toBe(0);
    expect(gw.logs.at(-1)).toMatchObject({ msg: "mq-gateway stopped", exit_code: 0 });
    expect(gw.logs.filter((l) => String(l.msg).startsWith("admin connection lost"))).toEqual([]);
    expect(gw.logs.filter((l) => l.level === 40 || (l.level as number) >= 50)).toEqual([]);
  });
});
