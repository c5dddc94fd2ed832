// The example configs as a new user takes them from a clone: `check` passes them, and
// examples/embedded.yaml starts a gateway with its own nats-server (the ports moved by
// flags only, so the test shares the machine). --log-format overrides log.format.
// `npm test` builds dist/ first; when running vitest alone, run `npx tsc -p tsconfig.json` before.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { natsServerBinary } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { freePort } from "../helpers/ports.js";

const root = join(import.meta.dirname, "../..");
const bin = join(root, "bin/mq-gateway.js");
const embeddedExample = join(root, "examples/embedded.yaml");
const started: ChildProcess[] = [];

afterEach(() => {
  for (const proc of started.splice(0)) if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
});

function cli(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, [bin, ...args], { cwd: root, encoding: "utf8", timeout: 20_000 });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** `run --config examples/embedded.yaml` on free ports; its stderr as it comes, and its exit. */
async function runExample(extra: string[] = [], config = embeddedExample) {
  const dir = mkdtempSync(join(tmpdir(), "mqgw-example-"));
  const args = [
    bin,
    "run",
    "--config",
    config,
    "--data",
    join(dir, "data"),
    "--nats-listen",
    `127.0.0.1:${await freePort()}`,
    "--mqtt",
    "127.0.0.1:0",
    "--amqp",
    "127.0.0.1:0",
    "--http",
    "127.0.0.1:0",
    ...extra,
  ];
  const proc = spawn(process.execPath, args, {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, NATS_SERVER_BIN: natsServerBinary(), NO_COLOR: "1" },
  });
  started.push(proc);
  const out = { stdout: "", stderr: "" };
  proc.stdout!.setEncoding("utf8").on("data", (c: string) => (out.stdout += c));
  proc.stderr!.setEncoding("utf8").on("data", (c: string) => (out.stderr += c));
  const exited = new Promise<number | null>((resolve) => proc.once("close", resolve));
  const waitFor = (pattern: RegExp) =>
    eventually(() => (pattern.test(out.stderr) ? true : undefined), 30_000, `${pattern} on stderr:\n${out.stderr}`);
  const stop = async () => {
    proc.kill("SIGTERM");
    return exited;
  };
  return { out, waitFor, stop };
}

const lines = (text: string) => text.split("\n").filter((l) => l !== "");

describe("examples/", () => {
  it("check passes both example configs", () => {
    expect(cli("check", "examples/embedded.yaml")).toEqual({ code: 0, stdout: "ok\n", stderr: "" });
    expect(cli("check", "examples/gateway.yaml")).toEqual({ code: 0, stdout: "ok\n", stderr: "" });
  });

  it("embedded.yaml starts a gateway with its own nats-server, serving, in one pretty line per event", async () => {
    const gw = await runExample();
    await gw.waitFor(/INFO \(\d+\): admin connection serving the admin subjects/);
    const serving = lines(gw.out.stderr).find((l) => l.includes("mq-gateway serving"));
    expect(serving).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO \(\d+\): mq-gateway serving \{.*"listeners":\{/);
    const http = /"http":"127\.0\.0\.1:(\d+)"/.exec(serving!)![1];
    const health = (await (await fetch(`http://127.0.0.1:${http}/healthz`)).json()) as Record<string, unknown>;
    expect(health).toMatchObject({ status: "ok", nats: "connected", admin_account: "MQG_ADMIN" });
    expect(gw.out.stderr).toMatch(/INFO \(\d+\): embedded nats-server ready/);
    expect(await gw.stop()).toBe(0);
    // Every line is an event's own line: no field spread over the lines below it.
    for (const line of lines(gw.out.stderr)) expect(line).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] [A-Z]+ \(\d+\): /);
  });

  it("--log-format json overrides the file's pretty: every stderr line is a JSON object", async () => {
    const gw = await runExample(["--log-format", "json"]);
    await gw.waitFor(/"msg":"admin connection serving the admin subjects"/);
    expect(await gw.stop()).toBe(0);
    const parsed = lines(gw.out.stderr).map((l) => JSON.parse(l) as { msg: string; level: number });
    expect(parsed.map((l) => l.msg)).toContain("mq-gateway serving");
    expect(parsed.at(-1)).toMatchObject({ msg: "mq-gateway stopped", exit_code: 0 });
  });

  it("--log-format pretty overrides a file's json; a bad value is a usage error naming the flag, exit 1", async () => {
    const jsonConfig = join(mkdtempSync(join(tmpdir(), "mqgw-example-")), "json.yaml");
    writeFileSync(jsonConfig, "log: { format: json }\n");
    const gw = await runExample(["--log-format", "pretty"], jsonConfig);
    await gw.waitFor(/INFO \(\d+\): mq-gateway serving \{/);
    expect(await gw.stop()).toBe(0);
    const bad = cli("run", "--config", "examples/embedded.yaml", "--log-format", "xml");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe('log.format (from --log-format): expected one of json, pretty, got the string "xml"\n');
    expect(cli("check", "examples/gateway.yaml", "--log-format", "xml").code).toBe(1);
  });
});
