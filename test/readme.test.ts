// README.md, walked as a new user walks it: a fresh clone, then the Run, Connect and
// Operate sections' commands exactly as written, each checked against what the README
// says it does, and the Run section's `--workers auto`. The default ports (1883, 5672, 8080, 4222) are used as written, inside a
// network namespace of the test's own, so nothing else on the machine can hold them.
// What needs the network (npm ci, Node 24 from npm) is done first, outside it: the same
// steps scripts/setup.sh takes, with the npm cache the test run already has.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { natsServerBinary } from "./helpers/natsServer.js";
import { eventually } from "./helpers/poll.js";

const root = join(import.meta.dirname, "..");
const namespace = `mqgw-readme-${process.pid}`;
let clone: string;
let env: NodeJS.ProcessEnv;
const background: Array<{ command: string; proc: ChildProcess; out: Output }> = [];

interface Output {
  stdout: string;
  stderr: string;
  code: number | null | undefined;
}

/** The shell commands of one README section's ```sh blocks, without their trailing comments. */
function sectionCommands(readme: string, heading: string): string[] {
  const start = readme.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`README has no section ${heading}`);
  const next = readme.indexOf("\n## ", start + 1);
  const section = readme.slice(start, next < 0 ? undefined : next);
  const commands: string[] = [];
  for (const block of section.matchAll(/```sh\n([\s\S]*?)```/g))
    for (const line of block[1]!.split("\n")) {
      const command = line.replace(/\s{2,}# .*$/, "").trim();
      if (command !== "") commands.push(command);
    }
  return commands;
}

/** Runs a command in the namespace, in the clone, as a shell would. */
function start(command: string): { proc: ChildProcess; out: Output; done: Promise<Output> } {
  const proc = spawn("ip", ["netns", "exec", namespace, "bash", "-c", command], {
    cwd: clone,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const out: Output = { stdout: "", stderr: "", code: undefined };
  proc.stdout!.setEncoding("utf8").on("data", (c: string) => (out.stdout += c));
  proc.stderr!.setEncoding("utf8").on("data", (c: string) => (out.stderr += c));
  const done = new Promise<Output>((resolve) =>
    proc.once("close", (code) => {
      out.code = code;
      resolve(out);
    }),
  );
  return { proc, out, done };
}

async function run(command: string, timeoutMs = 60_000): Promise<Output> {
  const { proc, done } = start(command);
  const timer = setTimeout(() => stopGroup(proc, "SIGKILL"), timeoutMs);
  const out = await done;
  clearTimeout(timer);
  return out;
}

function runInBackground(command: string): Output {
  const { proc, out } = start(command);
  background.push({ command, proc, out });
  return out;
}

function stopGroup(proc: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (proc.pid !== undefined) process.kill(-proc.pid, signal);
  } catch {
    // Already gone.
  }
}

const until = (what: string, check: () => boolean, timeoutMs = 30_000) =>
  eventually(() => (check() ? true : undefined), timeoutMs, what);

beforeAll(() => {
  const dir = mkdtempSync(join(tmpdir(), "mqgw-readme-"));
  clone = join(dir, "mq-gateway");
  execFileSync("git", ["clone", "--quiet", root, clone]);
  env = {
    ...process.env,
    NATS_SERVER_BIN: natsServerBinary(),
    // Node 24 (scripts/node.sh) from where this run already keeps it, not fetched again.
    MQGW_TOOLS_DIR: process.env.MQGW_TOOLS_DIR ?? join(root, ".tools"),
    NO_COLOR: "1",
  };
  execFileSync("npm", ["ci", "--prefer-offline", "--no-audit", "--no-fund"], {
    cwd: clone,
    env,
    stdio: "ignore",
    timeout: 240_000,
  });
  execFileSync("bash", ["scripts/node.sh"], { cwd: clone, env, stdio: "ignore", timeout: 120_000 });
  execFileSync("ip", ["netns", "add", namespace]);
  execFileSync("ip", ["netns", "exec", namespace, "ip", "link", "set", "lo", "up"]);
}, 400_000);

afterAll(async () => {
  for (const b of background) stopGroup(b.proc, "SIGTERM");
  await Promise.all(
    background.map(
      (b) =>
        new Promise<void>((resolve) => {
          if (b.out.code !== undefined) return resolve();
          const timer = setTimeout(() => {
            stopGroup(b.proc, "SIGKILL");
            resolve();
          }, 10_000);
          b.proc.once("close", () => {
            clearTimeout(timer);
            resolve();
          });
        }),
    ),
  );
  try {
    execFileSync("ip", ["netns", "del", namespace]);
  } catch {
    // Not made (beforeAll failed early).
  }
});

describe("README.md on a fresh clone", () => {
  const readme = readFileSync(join(root, "README.md"), "utf8");

  it("its Run, Connect and Operate commands are the ones this test walks", () => {
    expect(sectionCommands(readme, "Run it")).toEqual(["npm start", "npm test"]);
    expect(sectionCommands(readme, "Connect")).toEqual([
      "node examples/nats-sub.mjs 'plant.>'",
      "mosquitto_sub -h 127.0.0.1 -i dashboard-1 -t 'plant/#' -v",
      "node examples/amqp.mjs receive 'plant.>'",
      "mosquitto_pub -h 127.0.0.1 -t plant/line1/temp -m 21.5 -q 1",
      "node examples/amqp.mjs send plant.line1.temp 22.5",
      "curl -s 127.0.0.1:8080/healthz",
    ]);
    expect(sectionCommands(readme, "Operate")).toEqual([
      "node bin/mq-gateway.js ctl info",
      "node bin/mq-gateway.js ctl clients",
      "node bin/mq-gateway.js ctl kick dashboard-1",
      "curl -s '127.0.0.1:8080/clients?limit=10'",
      "curl -s 127.0.0.1:8080/metrics | grep '^mqgw_connections'",
      "node bin/mq-gateway.js ctl ldm",
    ]);
  });

  it("a fresh clone's bin/mq-gateway.js builds dist/ on its first run", async () => {
    const first = await run("node bin/mq-gateway.js --version");
    expect(first.stderr).toContain("mq-gateway: building dist/ (first run of a clone)");
    expect(first.stdout).toBe(
      `${(JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version}\n`,
    );
    expect((await run("node bin/mq-gateway.js --version")).stderr).not.toContain("building");
  });

  it("does what each command's comment says", { timeout: 300_000 }, async () => {
    const [npmStart, npmTest] = sectionCommands(readme, "Run it") as [string, string];
    const [natsSub, mqttSub, amqpReceive, mqttPub, amqpSend, health] = sectionCommands(readme, "Connect") as [
      string,
      string,
      string,
      string,
      string,
      string,
    ];
    const [info, clients, kick, httpClients, metrics, ldm] = sectionCommands(readme, "Operate") as [
      string,
      string,
      string,
      string,
      string,
      string,
    ];

    // npm start: "runs the gateway: MQTT 127.0.0.1:1883, AMQP 127.0.0.1:5672, HTTP 127.0.0.1:8080, embedded nats-server 127.0.0.1:4222"
    const gateway = runInBackground(npmStart);
    await until(
      "the gateway serving",
      () => /"msg":"admin connection serving the admin subjects"/.test(gateway.stderr),
      180_000,
    ).catch((e: Error) => {
      throw new Error(`${e.message}\n${gateway.stdout}\n${gateway.stderr}`);
    });
    const serving = gateway.stderr.split("\n").find((l) => l.includes('"msg":"mq-gateway serving"'))!;
    expect(JSON.parse(serving).listeners).toEqual({
      mqtt: "127.0.0.1:1883",
      amqp: "127.0.0.1:5672",
      http: "127.0.0.1:8080",
    });
    expect(gateway.stderr).toContain('"url":"nats://127.0.0.1:4222"');
    // npm test runs the suite this test is part of (.ci/run runs it); it is not run from inside itself.
    expect(npmTest).toBe("npm test");

    // The subscribers, then the publish: "nats-sub and amqp.mjs print plant.line1.temp 21.5, mosquitto_sub (-v) plant/line1/temp 21.5".
    const nats = runInBackground(natsSub);
    const mqtt = runInBackground(mqttSub);
    const amqp = runInBackground(amqpReceive);
    await until("the NATS subscriber listening", () => nats.stderr.includes("listening on plant.>"));
    await until("the AMQP receiver attached", () => amqp.stderr.includes("receiving from plant.>"));
    const http = (path: string) => run(`curl -s 127.0.0.1:8080${path}`);
    await eventually(
      async () => ((JSON.parse((await http("/clients")).stdout) as { total: number }).total === 2 ? true : undefined),
      15_000,
      "the MQTT subscriber and the AMQP receiver connected",
    );
    const published = await run(mqttPub);
    expect(published.code).toBe(0);
    await until("the NATS subscriber's message", () => nats.stdout.includes("plant.line1.temp 21.5\n"));
    await until("the MQTT subscriber's message", () => mqtt.stdout.includes("plant/line1/temp 21.5\n"));
    await until("the AMQP receiver's message", () => amqp.stdout.includes("plant.line1.temp 21.5\n"));

    // The AMQP send: "accepted once NATS has it; all three print 22.5".
    const sent = await run(amqpSend);
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stderr).toBe("sent to plant.line1.temp: accepted\n");
    await until("the NATS subscriber's AMQP message", () => nats.stdout.includes("plant.line1.temp 22.5\n"));
    await until("the MQTT subscriber's AMQP message", () => mqtt.stdout.includes("plant/line1/temp 22.5\n"));
    await until("the AMQP receiver's AMQP message", () => amqp.stdout.includes("plant.line1.temp 22.5\n"));
    const healthz = await run(health);
    expect(JSON.parse(healthz.stdout)).toMatchObject({
      status: "ok",
      nats: "connected",
      admin: "serving",
      admin_account: "MQG_ADMIN",
    });

    // ctl info: "every gateway: id, version, clients per account"
    const infoOut = await run(info);
    expect(infoOut.code, infoOut.stderr).toBe(0);
    const [header, row] = infoOut.stdout
      .trim()
      .split("\n")
      .map((l) => l.split(/\s{2,}/));
    expect(header).toEqual(["GATEWAY", "VERSION", "SINCE", "ACCOUNT", "MQTT", "AMQP"]);
    expect(row).toEqual([expect.stringMatching(/^[0-9a-f]{16}$/), "0.1.0", expect.any(String), "CLIENTS", "1", "1"]);

    // ctl clients: "the connected clients"
    const clientsOut = await run(clients);
    expect(clientsOut.code, clientsOut.stderr).toBe(0);
    expect(clientsOut.stdout).toMatch(/\bmqtt\s+CLIENTS\s+dashboard-1\s+127\.0\.0\.1:\d+/);
    expect(clientsOut.stdout).toMatch(/\bamqp\s+CLIENTS\s+amqp-example-\d+\s+127\.0\.0\.1:\d+/);
    expect(clientsOut.stdout).toMatch(/^2 clients on 1 gateway$/m);

    // ctl kick dashboard-1: "close one client"
    const kickOut = await run(kick);
    expect(kickOut.code, kickOut.stderr).toBe(0);
    expect(kickOut.stdout).toMatch(/^kicked dashboard-1 \(cid \d+\) on gateway [0-9a-f]{16}$/m);
    expect(gateway.stderr).toMatch(/"client_id":"dashboard-1".*"reason":"kicked/);

    // /clients: "this gateway's clients over HTTP, paged like /connz" (mosquitto_sub may be back by now)
    const page = JSON.parse((await run(httpClients)).stdout) as Record<string, unknown>;
    expect(page).toMatchObject({ offset: 0, limit: 10, total: expect.any(Number), clients: expect.any(Array) });

    // /metrics | grep: the connections gauge
    const metricsOut = await run(metrics);
    expect(metricsOut.stdout).toMatch(/^mqgw_connections\{protocol="mqtt",account="CLIENTS"\} \d+$/m);

    // ctl ldm: "lame duck: close listeners, let clients go over ldm.duration, stop"
    const ldmOut = await run(ldm);
    expect(ldmOut.code, ldmOut.stderr).toBe(0);
    expect(ldmOut.stdout).toMatch(/lame duck mode started/);
    const npmStartProc = background[0]!;
    await until("npm start to end", () => npmStartProc.out.code !== undefined, 60_000);
    expect(npmStartProc.out.code).toBe(0);
    expect(gateway.stderr).toMatch(/"exit_code":0,"msg":"mq-gateway stopped"/);
    // Every command ran on a supported Node: npm warns EBADENGINE on an older one (issue 25).
    for (const b of background) expect(`${b.out.stdout}${b.out.stderr}`, b.command).not.toContain("EBADENGINE");
    for (const out of [infoOut, clientsOut, kickOut, ldmOut])
      expect(`${out.stdout}${out.stderr}`).not.toContain("EBADENGINE");
  });

  it("npm start -- --workers auto: one gateway per core behind the same ports, the page and ctl ldm for all", {
    timeout: 240_000,
  }, async () => {
    // Run it: "`npm start -- --workers auto` ... runs one gateway per core behind the same
    // ports and one HTTP port, each worker with its own id <id>-<k> ...; `ctl ldm` and `ctl
    // rebalance` address all the workers at once, `/statecharts` shows every worker's machines."
    expect(readme).toContain("`npm start -- --workers auto`");
    const cores = Number((await run("node -e 'console.log(require(\"node:os\").availableParallelism())'")).stdout);
    const gateway = runInBackground("npm start -- --workers auto");
    await until(
      "the workers serving",
      () => gateway.stderr.split("\n").some((l) => l.includes('"msg":"mq-gateway serving"') && l.includes('"workers"')),
      180_000,
    ).catch((e: Error) => {
      throw new Error(`${e.message}\n${gateway.stdout}\n${gateway.stderr}`);
    });
    const ids = (JSON.parse((await run("node bin/mq-gateway.js ctl info --json")).stdout) as Array<{ id: string }>)
      .map((g) => g.id)
      .sort();
    expect(ids).toHaveLength(cores);
    expect(ids.every((id, k) => id.endsWith(`-${k + 1}`))).toBe(true);

    // The same ports as one gateway: an MQTT round trip on 1883 (retained, so the
    // subscriber that comes after the publish, on whichever worker, gets it).
    expect((await run("mosquitto_pub -h 127.0.0.1 -t plant/workers/1 -m w -q 1 -r")).code).toBe(0);
    const sub = runInBackground("mosquitto_sub -h 127.0.0.1 -t 'plant/workers/#' -C 1 -v");
    await until("the subscriber's message", () => sub.stdout === "plant/workers/1 w\n");

    // The page, drawn for every machine.
    const page = await run("curl -s -o /dev/null -w '%{http_code}' 127.0.0.1:8080/statecharts");
    expect(page.stdout).toBe("200");

    // ctl ldm: every worker lame-ducks, and the whole gateway stops, exit 0.
    const ldm = await run("node bin/mq-gateway.js ctl ldm");
    expect(ldm.code, ldm.stderr).toBe(0);
    expect(ldm.stdout.trim().split("\n")).toHaveLength(cores);
    expect(ldm.stdout).toMatch(/lame duck mode started/);
    const npmStart = background.find((b) => b.command === "npm start -- --workers auto")!;
    await until("npm start --workers to end", () => npmStart.out.code !== undefined, 60_000);
    expect(npmStart.out.code).toBe(0);
    expect(`${gateway.stdout}${gateway.stderr}`).not.toContain("EBADENGINE");
  });
});
