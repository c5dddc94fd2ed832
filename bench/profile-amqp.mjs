// The gateway under the AMQP throughput load (bench/amqpLoadgen.mjs: 2 rhea senders -> 2
// rhea receivers, 128 bytes), CPU-profiled through the inspector over the measured
// seconds only (after the warm-up; `--cpu-prof` would take start-up in, and is written
// only if the process exits in time): one profile per mode, summarised with lib/cpuprofile.mjs. `bash scripts/run-node.sh bench/profile-amqp.mjs [DIR]
// [presettled,unsettled] [seconds]`; the raw .cpuprofile files stay in DIR (default
// bench/results/profiles/amqp-<mode>/, git-ignored), the summaries beside them as .txt.
import { fork } from "node:child_process";
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { summarise } from "./lib/cpuprofile.mjs";
import { attach } from "./lib/inspector.mjs";
import { freePort, processName, startGateway, startNatsServer } from "./lib/procs.mjs";

const here = import.meta.dirname;
const base = process.argv[2] ?? join(here, "results/profiles");
const modes = (process.argv[3] ?? "presettled,unsettled").split(",");
const seconds = Number(process.argv[4] ?? 8);

function load(spec) {
  return new Promise((resolve, reject) => {
    const p = fork(join(here, "amqpLoadgen.mjs"), [JSON.stringify(spec)], {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    let answer;
    p.on("message", (m) => (answer = m));
    p.on("exit", (code) =>
      answer && !answer.error ? resolve(answer) : reject(new Error(answer?.error ?? `amqpLoadgen exited with ${code}`)),
    );
  });
}

for (const mode of modes) {
  const dir = join(base, `amqp-${mode}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const nats = await startNatsServer({ name: "gw-nats" });
  const port = await freePort();
  const gw = await startGateway({ nats, nodeArgs: [`--inspect=127.0.0.1:${port}`] });
  const insp = await attach(port);
  await insp.send("Profiler.enable");
  const pids = [...gw.pids(), nats.pid];
  const warmupMs = 2000;
  const ran = load({
    port: gw.amqpPort,
    pids,
    pidNames: pids.map(processName),
    durationMs: seconds * 1000,
    warmupMs,
    pairs: 2,
    kind: "throughput",
    mode,
  });
  await new Promise((r) => setTimeout(r, warmupMs));
  await insp.send("Profiler.start");
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const { profile } = await insp.send("Profiler.stop");
  insp.close();
  writeFileSync(join(dir, `${mode}.cpuprofile`), JSON.stringify(profile));
  const x = await ran;
  await gw.stop();
  await nats.stop();
  const line = `${mode}: ${x.msgsPerSec.toFixed(0)} msgs/s, ${x.serverCpuUsPerMsg.toFixed(1)} µs/msg (${Object.entries(
    x.serverCpuUsPerMsgByProcess,
  )
    .map(([n, v]) => `${n} ${v.toFixed(1)}`)
    .join(", ")}) under the profiler (the inspector's socket is in the gateway's CPU too)`;
  const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
  const text = `${line}\n${file ? summarise(join(dir, file), 40) : "no profile written"}`;
  writeFileSync(join(base, `amqp-${mode}.txt`), `${text}\n`);
  console.log(`\n=== ${mode} ===\n${text}`);
}
