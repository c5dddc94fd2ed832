// The fleet scenario (issue 16): 2,000 MQTT clients, each its own connection and client
// id, one PUBLISH per write at 20 msgs/s each (40,000 msgs/s in all), and 4 subscribers
// that each take a quarter of the fleet (`<prefix>/<k>/#`). QoS 0 on plain subjects;
// QoS 1 on the stored subject of the qos1 row (`stored/...`, the binding's stream), with
// QoS 1 subscriptions. The load is spread over PUB_PROCS publisher processes and one
// subscriber process; their CPU is reported beside the servers'.
import { fork } from "node:child_process";
import { join } from "node:path";
import { cpuMicros, machineTicks } from "./lib/procs.mjs";

const here = import.meta.dirname;
const PUB_PROCS = 2;
const SUBS = 4;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let nextAddress = 1;

function part(spec) {
  const p = fork(join(here, "fleetLoadgen.mjs"), [JSON.stringify(spec)], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const waiting = [];
  let failure;
  p.on("message", (m) => {
    if (m.error) failure = new Error(m.error);
    const w = waiting.shift();
    if (w) (m.error ? w.reject(new Error(m.error)) : w.resolve(m));
  });
  p.on("exit", (code) => {
    for (const w of waiting.splice(0)) w.reject(failure ?? new Error(`fleetLoadgen exited with ${code}`));
  });
  const next = () => new Promise((resolve, reject) => waiting.push({ resolve, reject }));
  return {
    ready: next(),
    ask: (msg) => {
      const answer = next();
      p.send(msg);
      return answer;
    },
    send: (msg) => p.send(msg),
    kill: () => p.exitCode === null && p.kill("SIGKILL"),
  };
}

/** One fleet run against one side; `qos` 0 or 1. */
/** `measured`, when given, wraps the measured window (the profiler's start and stop: steady state only). */
export async function fleetRun({ side, sideName, qos, durationMs, warmupMs, clients = 2000, ratePerClient = 20, log, measured }) {
  const prefix = qos === 0 ? "fleet" : "stored/fleet";
  const tag = `${sideName}-q${qos}-${process.pid}-${nextAddress}`;
  const all = Array.from({ length: clients }, (_, i) => ({ id: `${tag}-dev${i}`, topic: `${prefix}/${i % SUBS}/dev${i}` }));
  const rate = clients * ratePerClient;
  const seconds = (durationMs + warmupMs) / 1000 + 5;
  const sub = part({ role: "sub", port: side.mqttPort, qos, subs: Array.from({ length: SUBS }, (_, k) => ({ id: `${tag}-sub${k}`, filter: `${prefix}/${k}/#` })), expectedSamples: Math.ceil(rate * seconds) });
  const parts = [sub];
  try {
    await sub.ready;
    const pubs = Array.from({ length: PUB_PROCS }, (_, k) =>
      part({ role: "pub", port: side.mqttPort, qos, ratePerClient, localAddress: `127.0.1.${nextAddress++ % 250}`, clients: all.filter((_, i) => i % PUB_PROCS === k) }),
    );
    parts.push(...pubs);
    await Promise.all(pubs.map((p) => p.ready));
    for (const p of parts) p.send("start");
    await sleep(warmupMs);
    const snap = async () => {
      const marks = await Promise.all(parts.map((p) => p.ask("mark")));
      return { t: performance.now(), marks: marks.map((m) => m.mark), server: side.pids.map(cpuMicros), machine: machineTicks() };
    };
    await measured?.start();
    const a = await snap();
    await sleep(durationMs);
    const b = await snap();
    await measured?.stop();
    const done = (await Promise.all(parts.map((p) => p.ask("stop")))).map((m) => m.done);
    const secs = (b.t - a.t) / 1000;
    const d = (k) => b.marks.reduce((s, m, i) => s + m[k] - a.marks[i][k], 0);
    const delivered = d("received");
    const published = d("sent");
    const serverCpu = side.pids.map((_, i) => b.server[i] - a.server[i]);
    const totalServer = serverCpu.reduce((x, y) => x + y, 0);
    const selfCpu = d("cpuUs");
    const lat = done[0];
    const r = {
      side: sideName,
      qos,
      clients,
      offeredPerSec: rate,
      seconds: secs,
      publishedPerSec: published / secs,
      msgsPerSec: delivered / secs,
      skipped: d("skipped"),
      lost: Math.max(0, published - delivered),
      serverCpuUsPerMsg: delivered > 0 ? totalServer / delivered : null,
      serverCpuUsPerMsgByProcess: Object.fromEntries(side.pidNames.map((n, i) => [n, delivered > 0 ? serverCpu[i] / delivered : null])),
      serverCores: totalServer / 1e6 / secs,
      loadgenCores: selfCpu / 1e6 / secs,
      loadgenProcesses: parts.length,
      loadgenShareOfCpu: selfCpu / (selfCpu + totalServer),
      machineBusy: (b.machine.busy - a.machine.busy) / Math.max(1, b.machine.total - a.machine.total),
      samples: lat.samples,
      p50Ms: lat.p50Ms,
      p90Ms: lat.p90Ms,
      p99Ms: lat.p99Ms,
      maxMs: lat.maxMs,
    };
    const f = (x, n = 0) => (x == null ? "-" : x.toFixed(n));
    log(
      `fleet q${qos} ${sideName.padEnd(9)} ${f(r.msgsPerSec).padStart(7)} of ${rate} msg/s  ${f(r.serverCpuUsPerMsg, 2).padStart(6)} µs/msg  p50 ${f(r.p50Ms, 2)} ms p99 ${f(r.p99Ms, 2)} ms` +
        `  skipped ${r.skipped}  loadgen ${f(r.loadgenCores, 2)} cores (${f(100 * r.loadgenShareOfCpu)}% of CPU)  machine ${f(100 * r.machineBusy)}% busy`,
    );
    return r;
  } finally {
    for (const p of parts) p.kill();
    await sleep(500);
  }
}
