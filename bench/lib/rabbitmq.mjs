// RabbitMQ 3.10 with its AMQP 1.0 plugin, the reference for the AMQP rows: Debian's
// package (bench/lib/rabbitmq.sh finds or installs it), run by the bench itself in the
// foreground, on loopback, with its own node name, data dir, cookie and epmd, so nothing
// of a system broker is used or disturbed.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, processName, processTree } from "./procs.mjs";

export { processName };

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Path of Debian's rabbitmq-server script, or throws with why not. */
export function rabbitmqServerScript() {
  try {
    return execFileSync("bash", [join(import.meta.dirname, "rabbitmq.sh")], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
  } catch (e) {
    const why = String(e.stderr ?? e.message).trim().split("\n").filter(Boolean).at(-1);
    throw new Error(`rabbitmq-server could not be installed (${why})`);
  }
}

function portOpen(port) {
  return new Promise((resolve) => {
    const s = net.connect({ host: "127.0.0.1", port }, () => {
      s.destroy();
      resolve(true);
    });
    s.on("error", () => resolve(false));
  });
}

function stop(proc, timeoutMs = 20_000) {
  return new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
    const t = setTimeout(() => proc.kill("SIGKILL"), timeoutMs);
    proc.once("exit", () => {
      clearTimeout(t);
      resolve();
    });
    proc.kill("SIGTERM");
  });
}

/**
 * Starts a broker and resolves once its AMQP port answers. `pids()` is every process
 * whose CPU counts: beam.smp with its helpers, and the epmd started for it.
 */
export async function startRabbitmq() {
  const script = rabbitmqServerScript();
  const dir = mkdtempSync(join(tmpdir(), "mqgw-bench-rabbit-"));
  const [amqpPort, distPort, epmdPort] = [await freePort(), await freePort(), await freePort()];
  writeFileSync(join(dir, "enabled_plugins"), "[rabbitmq_amqp1_0].\n");
  writeFileSync(
    join(dir, "rabbitmq.conf"),
    [
      `listeners.tcp.default = 127.0.0.1:${amqpPort}`,
      "loopback_users.guest = true",
      // A shared machine's disk may be fuller than the default 50 MB allows for; messages are transient.
      "disk_free_limit.absolute = 10MB",
      "log.console = true",
      "log.console.level = warning",
      "log.file = false",
      "",
    ].join("\n"),
  );
  writeFileSync(join(dir, ".erlang.cookie"), `BENCH${process.pid}${Date.now()}`, { mode: 0o400 });
  const env = {
    ...process.env,
    HOME: dir,
    ERL_EPMD_PORT: String(epmdPort),
    ERL_EPMD_ADDRESS: "127.0.0.1",
    RABBITMQ_NODENAME: `mqgwbench${process.pid}@localhost`,
    RABBITMQ_NODE_IP_ADDRESS: "127.0.0.1",
    RABBITMQ_NODE_PORT: String(amqpPort),
    RABBITMQ_DIST_PORT: String(distPort),
    RABBITMQ_CONFIG_FILE: join(dir, "rabbitmq.conf"),
    RABBITMQ_ENABLED_PLUGINS_FILE: join(dir, "enabled_plugins"),
    RABBITMQ_MNESIA_BASE: join(dir, "mnesia"),
    RABBITMQ_LOG_BASE: join(dir, "log"),
    RABBITMQ_PID_FILE: join(dir, "rabbit.pid"),
    RABBITMQ_LOGS: "-",
    RABBITMQ_CONF_ENV_FILE: join(dir, "rabbitmq-env.conf"),
  };
  writeFileSync(env.RABBITMQ_CONF_ENV_FILE, "");
  // Our own epmd in the foreground on its own port: its pid is ours to count and stop.
  const epmd = spawn("epmd", ["-port", String(epmdPort), "-address", "127.0.0.1"], { stdio: "ignore", env });
  const proc = spawn(script, [], { stdio: ["ignore", "pipe", "pipe"], env, cwd: dir });
  let output = "";
  for (const s of [proc.stdout, proc.stderr]) s.setEncoding("utf8").on("data", (c) => (output = (output + c).slice(-20_000)));
  const stopAll = async () => {
    await stop(proc);
    await stop(epmd, 2_000);
    rmSync(dir, { recursive: true, force: true });
  };
  const until = Date.now() + 90_000;
  while (!(await portOpen(amqpPort))) {
    if (proc.exitCode !== null || Date.now() > until) {
      await stopAll();
      const last = output.trim().split("\n").slice(-6).join(" | ").slice(0, 600);
      throw new Error(proc.exitCode !== null ? `rabbitmq-server exited with ${proc.exitCode}: ${last}` : `rabbitmq-server did not listen within 90 s: ${last}`);
    }
    await sleep(200);
  }
  const version = /RabbitMQ (\d+\.\d+\.\d+)/.exec(output)?.[1] ?? "3.10";
  const pids = () => [...processTree(proc.pid).filter((p) => p !== proc.pid), epmd.pid];
  return { name: "rabbitmq", version, amqpPort, pid: proc.pid, pids, dir, output: () => output, stop: stopAll };
}
