// Process accounting from /proc, and the servers under test.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const root = join(import.meta.dirname, "../..");

/** Clock ticks per second (USER_HZ); 100 on Linux unless `getconf` says otherwise. */
export const CLK_TCK = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** utime + stime of a process (all its threads), in microseconds. */
export function cpuMicros(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name, which is in parentheses and may hold spaces.
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(f[11]) + Number(f[12])) * 1e6) / CLK_TCK;
}

export function rssKiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) : 0;
}

/** Busy and total jiffies of the whole machine (all cores), from /proc/stat. */
export function machineTicks() {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = line[3] + (line[4] ?? 0);
  const total = line.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

/** Every process under `pid` (itself included), from /proc: the broker is a shell, beam.smp and its helpers. */
export function processTree(pid) {
  const parentOf = new Map();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      parentOf.set(Number(d), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {}
  }
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) for (const [child, parent] of parentOf) if (parent === tree[i]) tree.push(child);
  return tree;
}

export function processName(pid) {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "?";
  }
}

export const sum = (pids, f) => pids.reduce((a, p) => a + f(p), 0);

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

export function natsServerBinary() {
  return execFileSync("bash", [join(root, "scripts/nats-server.sh")], { encoding: "utf8" }).trim();
}

function waitForLine(stream, re, what, timeoutMs = 20_000) {
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`${what} did not start:\n${seen.slice(-3000)}`)), timeoutMs);
    const on = (chunk) => {
      seen += chunk;
      const m = re.exec(seen);
      if (m) {
        clearTimeout(timer);
        stream.off("data", on);
        stream.resume();
        resolve(m);
      }
    };
    stream.setEncoding("utf8").on("data", on);
  });
}

function stopper(proc) {
  return () =>
    new Promise((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
      const t = setTimeout(() => proc.kill("SIGKILL"), 10_000);
      proc.once("exit", () => {
        clearTimeout(t);
        resolve();
      });
      proc.kill("SIGTERM");
    });
}

/** A nats-server with JetStream; `mqttPort` adds its own MQTT listener (the reference). */
export async function startNatsServer({ name, mqttPort }) {
  const dir = mkdtempSync(join(tmpdir(), `mqgw-bench-${name}-`));
  const port = await freePort();
  const conf = [
    `server_name: ${name}`,
    `listen: 127.0.0.1:${port}`,
    `max_payload: 1MB`,
    `jetstream { store_dir: "${join(dir, "js")}" }`,
    ...(mqttPort ? [`mqtt { listen: 127.0.0.1:${mqttPort} }`] : []),
  ].join("\n");
  writeFileSync(join(dir, "server.conf"), conf);
  const proc = spawn(natsServerBinary(), ["-c", join(dir, "server.conf")], { stdio: ["ignore", "ignore", "pipe"] });
  await waitForLine(proc.stderr, /Server is ready/, `nats-server ${name}`);
  return { name, pid: proc.pid, port, url: `nats://127.0.0.1:${port}`, mqttPort, dir, proc, stop: stopper(proc) };
}

/**
 * The built gateway (`node bin/mq-gateway.js run`) in front of `nats`. `workers`: appends
 * `--workers N` (the gateway's processes are then `pids()`, the primary and its workers);
 * a gateway without that flag exits, and the error says so.
 */
export async function startGateway({ nats, bindings = [], nodeArgs = [], env = {}, stdout = "ignore", config: extra = {}, workers }) {
  const dir = mkdtempSync(join(tmpdir(), "mqgw-bench-gw-"));
  const mqttPort = await freePort();
  const amqpPort = await freePort();
  const config = {
    id: "bench",
    amqp: { listen: `127.0.0.1:${amqpPort}` },
    http: { listen: "" },
    log: { level: "warn", format: "json" },
    bindings: bindings.map((stream) => ({ stream })),
    ...extra,
  };
  // The default configuration (issue 16): what a user runs. An opt-in setting comes from
  // the caller as `config` and is named as such in the table.
  config.mqtt = { listen: `127.0.0.1:${mqttPort}`, ...(extra.mqtt ?? {}) };
  writeFileSync(join(dir, "gateway.json"), JSON.stringify(config, null, 2));
  const args = [...nodeArgs, join(root, "bin/mq-gateway.js"), "run", "--config", join(dir, "gateway.json"), "--nats", nats.url, "--data", join(dir, "data"), ...(workers ? ["--workers", String(workers)] : [])];
  const proc = spawn(process.execPath, args, { stdio: ["ignore", stdout, "pipe"], cwd: dir, env: { ...process.env, ...env } });
  let stderr = "";
  proc.stderr.setEncoding("utf8").on("data", (c) => {
    stderr = (stderr + c).slice(-20_000);
  });
  await waitForPort(mqttPort, proc, () => stderr);
  const pids = () => processTree(proc.pid).filter((p) => processName(p) !== "sh");
  return { name: "gateway", pid: proc.pid, pids, mqttPort, amqpPort, dir, proc, stderr: () => stderr, stop: stopper(proc) };
}

async function waitForPort(port, proc, stderr, timeoutMs = 30_000) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (proc.exitCode !== null) throw new Error(`gateway exited with ${proc.exitCode}:\n${stderr()}`);
    const ok = await new Promise((resolve) => {
      const s = net.connect({ host: "127.0.0.1", port }, () => {
        s.destroy();
        resolve(true);
      });
      s.on("error", () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`gateway did not listen on ${port}:\n${stderr()}`);
}
