#!/usr/bin/env node
// `npm run bench`: mq-gateway beside nats-server's own MQTT listener, same scenarios,
// alternating sides, every figure printed for both with the ratio gateway / reference.
// Results: bench/results/latest.json and bench/results/latest.md. See docs/performance.md.
//
// Options: --rounds N (2)  --duration MS (5000)  --warmup MS (1000)  --only a,b,c
//          --idle 1000,5000,10000 | --idle 0   --no-amqp   --profile SCENARIO[,..] (gateway
//          under node --cpu-prof, summaries in bench/results/profiles/)
import { fork } from "node:child_process";
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { summarise } from "./lib/cpuprofile.mjs";
import { attach, summariseAllocations } from "./lib/inspector.mjs";
import { cpuMicros, freePort, rssKiB, startGateway, startNatsServer, sum } from "./lib/procs.mjs";
import { SCENARIOS } from "./lib/scenarios.mjs";
import { amqpBench } from "./amqp.mjs";

const here = import.meta.dirname;
const resultsDir = join(here, "results");
const { values: opt } = parseArgs({
  options: {
    rounds: { type: "string", default: "2" },
    duration: { type: "string", default: "5000" },
    warmup: { type: "string", default: "1000" },
    only: { type: "string" },
    idle: { type: "string", default: "1000,5000,10000" },
    "no-amqp": { type: "boolean", default: false },
    profile: { type: "string" },
    "alloc-profile": { type: "string" },
    out: { type: "string", default: "latest" },
    rate: { type: "string" },
  },
});
const rounds = Number(opt.rounds);
const durationMs = Number(opt.duration);
const warmupMs = Number(opt.warmup);
const THROUGHPUT = ["qos0", "fanout", "m2n", "n2m", "qos1", "qos1m", "qos1n"];
const LATENCY = ["lat0", "lat1"];
const only = opt.only ? new Set(opt.only.split(",")) : undefined;
const want = (name) => !only || only.has(name);
const idleCounts = opt.idle === "0" ? [] : opt.idle.split(",").map(Number).filter((n) => n > 0);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const started = Date.now();
const log = (...a) => console.error(`[${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s]`, ...a);

const STORED_STREAM = "BENCH_STORED";
const live = new Set();

/** The reference (nats-server with its MQTT listener) and the gateway in front of its own nats-server. */
// BENCH_GATEWAY_NODE_ARGS: extra node flags for the gateway process (experiments: heap sizes, GC).
const extraGatewayArgs = (process.env.BENCH_GATEWAY_NODE_ARGS ?? "").split(" ").filter(Boolean);
async function startStack({ gatewayNodeArgs = [] } = {}) {
  gatewayNodeArgs = [...extraGatewayArgs, ...gatewayNodeArgs];
  const refMqtt = await freePort();
  const ref = await startNatsServer({ name: "ref", mqttPort: refMqtt });
  live.add(ref);
  const gwNats = await startNatsServer({ name: "gwnats" });
  live.add(gwNats);
  // The binding's stream: interest retention and file storage, like nats-server's own
  // $MQTT_msgs stream that holds the reference's QoS 1 messages.
  const nc = await connect({ servers: gwNats.url });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: STORED_STREAM, subjects: ["stored.>"], retention: "interest", storage: "file" });
  await nc.close();
  const gw = await startGateway({ nats: gwNats, bindings: [STORED_STREAM], nodeArgs: gatewayNodeArgs });
  live.add(gw);
  const sides = {
    reference: { mqttPort: refMqtt, natsPort: ref.port, amqpPort: undefined, pids: [ref.pid], pidNames: ["nats-server"] },
    gateway: { mqttPort: gw.mqttPort, natsPort: gwNats.port, amqpPort: gw.amqpPort, pids: [gw.pid, gwNats.pid], pidNames: ["gateway", "nats-server"] },
  };
  const stop = async () => {
    const warnings = gw.stderr().split("\n").filter((l) => l.trim());
    if (warnings.length) log(`gateway stderr (last ${Math.min(5, warnings.length)} of ${warnings.length} lines):\n${warnings.slice(-5).map((l) => l.slice(0, 400)).join("\n")}`);
    for (const p of [gw, gwNats, ref]) {
      await p.stop();
      live.delete(p);
      rmSync(p.dir, { recursive: true, force: true });
    }
  };
  return { ref, gwNats, gw, sides, stop };
}

function child(script, spec) {
  return new Promise((resolve, reject) => {
    const p = fork(join(here, script), [JSON.stringify(spec)], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    let answer;
    p.on("message", (m) => {
      answer = m;
    });
    p.on("exit", (code) => {
      if (answer?.error) reject(new Error(answer.error));
      else if (answer) resolve(answer);
      else reject(new Error(`${script} exited with ${code} and no answer`));
    });
  });
}

async function throughput(stack, scenario, side) {
  const s = stack.sides[side];
  const r = await child("loadgen.mjs", { scenario, side, mqttPort: s.mqttPort, natsPort: s.natsPort, pids: s.pids, pidNames: s.pidNames, durationMs, warmupMs, rate: opt.rate ? Number(opt.rate) : undefined });
  const f = (x, d = 0) => (x === null || x === undefined ? "-" : x.toFixed(d));
  log(
    `${scenario.padEnd(6)} ${side.padEnd(9)} ${f(r.msgsPerSec).padStart(8)} msg/s  ${f(r.serverCpuUsPerMsg, 2).padStart(6)} µs/msg` +
      (r.p50Ms !== undefined ? `  p50 ${f(r.p50Ms, 3)} ms p99 ${f(r.p99Ms, 3)} ms` : "") +
      `  lost ${r.lost}  loadgen ${(100 * r.loadgenShareOfCpu).toFixed(0)}% of CPU  machine ${(100 * r.machineBusy).toFixed(0)}% busy`,
  );
  await sleep(300);
  return r;
}

/** N idle clients on one side: connects/s, then RSS growth of its server processes per connection. */
let nextAddress = 2;
const WARM_CLIENTS = 300;
async function idle(stack, side, count) {
  const s = stack.sides[side];
  // Warm: the first MQTT clients make each side create what it keeps per account, and let
  // the gateway's JIT compile the connect path before it is timed (the reference's is
  // compiled ahead of time). They stay connected until the end: closed, the memory they
  // freed would be reused by the measured clients and hide part of their growth. Same on
  // both sides.
  const warm = fork(join(here, "idle.mjs"), [JSON.stringify({ port: s.mqttPort, count: WARM_CLIENTS, concurrency: 16, localAddress: "127.0.0.1", prefix: `warm-${side}` })], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  await new Promise((res) => warm.on("message", (m) => (m.opened || m.error ? res(m) : undefined)));
  await sleep(1500);
  const baseByPid = s.pids.map(rssKiB);
  const cpuBefore = s.pids.map(cpuMicros);
  const perProcess = 5000;
  const nProcs = Math.ceil(count / perProcess);
  const kids = [];
  for (let i = 0; i < nProcs; i++) {
    const n = Math.min(perProcess, count - i * perProcess);
    const spec = { port: s.mqttPort, count: n, concurrency: Math.ceil(128 / nProcs), localAddress: `127.0.0.${nextAddress++}`, prefix: `idle-${side}-${count}-${i}` };
    const p = fork(join(here, "idle.mjs"), [JSON.stringify(spec)], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    kids.push({ p, opened: new Promise((res) => p.on("message", (m) => m.opened || m.error ? res(m) : undefined)) });
  }
  const opened = await Promise.all(kids.map((k) => k.opened));
  const err = opened.find((o) => o.error);
  if (err) throw new Error(err.error);
  const connected = sum(opened, (o) => o.opened.connected);
  const failed = sum(opened, (o) => o.opened.failed);
  const span = (Math.max(...opened.map((o) => o.opened.end)) - Math.min(...opened.map((o) => o.opened.start))) / 1000;
  const connectCpu = s.pids.map((pid, i) => cpuMicros(pid) - cpuBefore[i]);
  await sleep(3000);
  const rssByPid = s.pids.map(rssKiB);
  const grown = rssByPid.map((r, i) => r - baseByPid[i]);
  const closed = await Promise.all(
    kids.map(
      (k) =>
        new Promise((res) => {
          k.p.on("message", (m) => m.closed && res(m));
          k.p.send("close");
        }),
    ),
  );
  warm.send("close");
  const alive = sum(closed, (c) => c.aliveAtClose);
  const r = {
    side,
    count,
    connected,
    failed,
    firstError: opened.map((o) => o.opened.firstError).find(Boolean),
    aliveAfterSettle: alive,
    connectsPerSec: connected / span,
    serverCpuUsPerConnect: sum(connectCpu, (c) => c) / Math.max(1, connected),
    serverCpuUsPerConnectByProcess: Object.fromEntries(s.pidNames.map((n, i) => [n, connectCpu[i] / Math.max(1, connected)])),
    rssKiBPerConn: sum(grown, (g) => g) / Math.max(1, connected),
    rssKiBPerConnByProcess: Object.fromEntries(s.pidNames.map((n, i) => [n, grown[i] / Math.max(1, connected)])),
    rssKiBAfter: Object.fromEntries(s.pidNames.map((n, i) => [n, rssByPid[i]])),
  };
  log(
    `idle ${String(count).padStart(5)} ${side.padEnd(9)} ${r.connectsPerSec.toFixed(0).padStart(6)} conn/s  ${r.serverCpuUsPerConnect.toFixed(0).padStart(5)} µs CPU/connect  ${r.rssKiBPerConn.toFixed(1).padStart(6)} KiB/conn` +
      `  (${Object.entries(r.rssKiBPerConnByProcess).map(([n, v]) => `${n} ${v.toFixed(1)}`).join(", ")})  failed ${failed}, alive ${alive}`,
  );
  await sleep(1500);
  return r;
}

const median = (xs) => {
  const s = xs.filter((x) => typeof x === "number" && Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return null;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

async function main() {
  mkdirSync(resultsDir, { recursive: true });
  if (opt.profile) return profile(opt.profile.split(","));
  if (opt["alloc-profile"]) return allocProfile(opt["alloc-profile"].split(","));
  const out = {
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, node: process.version, platform: `${os.type()} ${os.release()}`, memGiB: os.totalmem() / 2 ** 30 },
    settings: { rounds, durationMs, warmupMs, payloadBytes: 128, mqttVersion: "3.1.1" },
    throughput: {},
    latency: {},
    idle: {},
    amqp: null,
  };

  if (idleCounts.length && want("idle")) {
    for (const [i, count] of idleCounts.entries()) {
      // A fresh pair of stacks per size: RSS growth is then not hidden by heap freed earlier.
      const stack = await startStack();
      const order = i % 2 === 0 ? ["reference", "gateway"] : ["gateway", "reference"];
      out.idle[count] = {};
      for (const side of order) out.idle[count][side] = await idle(stack, side, count);
      await stack.stop();
    }
  }

  const needStack = [...THROUGHPUT, ...LATENCY, "amqp"].some(want);
  const stack = needStack ? await startStack() : undefined;
  const runs = {};
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? ["reference", "gateway"] : ["gateway", "reference"];
    for (const scenario of [...THROUGHPUT, ...LATENCY]) {
      if (!want(scenario)) continue;
      runs[scenario] ??= { reference: [], gateway: [] };
      for (const side of order) runs[scenario][side].push(await throughput(stack, scenario, side));
    }
  }
  for (const [scenario, bySide] of Object.entries(runs)) {
    const target = LATENCY.includes(scenario) ? out.latency : out.throughput;
    target[scenario] = { title: SCENARIOS[scenario].title };
    for (const [side, rs] of Object.entries(bySide)) {
      const agg = {};
      for (const k of ["msgsPerSec", "serverCpuUsPerMsg", "loadgenCores", "loadgenShareOfCpu", "machineBusy", "serverCores", "p50Ms", "p90Ms", "p99Ms", "lost"]) {
        if (rs.some((x) => x[k] !== undefined)) agg[k] = median(rs.map((x) => x[k]));
      }
      target[scenario][side] = { ...agg, runs: rs };
    }
  }

  if (want("amqp") && !opt["no-amqp"]) {
    out.amqp = await amqpBench({ stack, freshStack: startStack, durationMs, warmupMs, log }).catch((e) => ({ measured: false, reason: `AMQP: not measured: ${e.message}` }));
  } else out.amqp = { measured: false, reason: "AMQP: not measured: skipped (--no-amqp or --only)" };
  await stack?.stop();

  out.elapsedSeconds = (Date.now() - started) / 1000;
  const md = table(out);
  writeFileSync(join(resultsDir, `${opt.out}.json`), `${JSON.stringify(out, null, 2)}\n`);
  writeFileSync(join(resultsDir, `${opt.out}.md`), md);
  console.log(md);
  log(`done in ${out.elapsedSeconds.toFixed(0)} s; bench/results/${opt.out}.json and .md written`);
}

// -- the table -------------------------------------------------------------------------

function table(out) {
  const f = (x, d) => (x === null || x === undefined || !Number.isFinite(x) ? "-" : x.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d }));
  const ratio = (g, r, d = 2) => (g == null || r == null || r === 0 ? "-" : `${(g / r).toFixed(d)}x`);
  const rows = [];
  const row = (what, ref, gw, d, target = "") => rows.push(`| ${what} | ${f(ref, d)} | ${f(gw, d)} | ${ratio(gw, ref)} | ${target} |`);
  const QOS0 = new Set(["qos0", "m2n", "n2m"]);
  for (const [name, t] of Object.entries(out.throughput)) {
    row(`${t.title}: msgs/s`, t.reference?.msgsPerSec, t.gateway?.msgsPerSec, 0, name === "qos1" ? ">= 1.0x" : "");
    row(`${t.title}: server CPU µs/msg`, t.reference?.serverCpuUsPerMsg, t.gateway?.serverCpuUsPerMsg, 2, QOS0.has(name) ? "<= 2.5x" : "");
  }
  for (const t of Object.values(out.latency)) {
    row(`${t.title}: p50 ms`, t.reference?.p50Ms, t.gateway?.p50Ms, 3, "<= 2x");
    row(`${t.title}: p99 ms`, t.reference?.p99Ms, t.gateway?.p99Ms, 3);
  }
  for (const [count, t] of Object.entries(out.idle)) {
    row(`${Number(count).toLocaleString("en-US")} idle MQTT connections: RSS KiB/conn (all server processes)`, t.reference?.rssKiBPerConn, t.gateway?.rssKiBPerConn, 1, "gateway <= 16 KiB");
    row(`${Number(count).toLocaleString("en-US")} idle MQTT connections: connects/s`, t.reference?.connectsPerSec, t.gateway?.connectsPerSec, 0, ">= 1.0x");
    row(`${Number(count).toLocaleString("en-US")} idle MQTT connections: server CPU µs per connect`, t.reference?.serverCpuUsPerConnect, t.gateway?.serverCpuUsPerConnect, 0);
  }
  const lg = [];
  for (const t of [...Object.values(out.throughput), ...Object.values(out.latency)]) {
    for (const side of ["reference", "gateway"]) {
      const x = t[side];
      if (x) lg.push(`| ${t.title} | ${side} | ${f(x.serverCores, 2)} | ${f(x.loadgenCores, 2)} | ${f(100 * x.loadgenShareOfCpu, 0)}% | ${f(100 * x.machineBusy, 0)}% | ${f(x.lost, 0)} |`);
    }
  }
  let amqp;
  if (out.amqp?.measured) {
    amqp = [
      "| AMQP figure (gateway only; no reference exists for NATS) | value |",
      "| --- | --- |",
      ...out.amqp.rows.map(([k, v]) => `| ${k} | ${v} |`),
    ].join("\n");
  } else amqp = `**${out.amqp?.reason ?? "AMQP: not measured"}**`;
  const m = out.machine;
  return `# mq-gateway vs nats-server MQTT (\`npm run bench\`)

${out.date}; ${m.cpus} × ${m.cpuModel}; Node ${m.node}; ${m.platform}. MQTT 3.1.1, 128-byte payloads,
${out.settings.rounds} round(s) per side alternating, ${out.settings.warmupMs / 1000} s warm-up + ${out.settings.durationMs / 1000} s measured each; medians.
CPU is utime+stime of every server process (gateway + its nats-server; the reference nats-server) per delivered message.

| figure | reference (nats-server MQTT) | mq-gateway + nats-server | gateway / reference | target |
| --- | ---: | ---: | ---: | --- |
${rows.join("\n")}

${amqp}

Load generator (one process per run, raw sockets, pre-encoded packets): its own CPU beside the servers'.

| scenario | side | server cores | load-gen cores | load-gen share of CPU | machine busy | QoS 0 lost |
| --- | --- | ---: | ---: | ---: | ---: | ---: |
${lg.join("\n")}
`;
}

// -- profiling -------------------------------------------------------------------------

async function profile(scenarios) {
  const dir = join(resultsDir, "profiles");
  mkdirSync(dir, { recursive: true });
  for (const scenario of scenarios) {
    // The raw .cpuprofile (open it in Chrome DevTools) stays in profiles/<scenario>/, git-ignored.
    const sub = join(dir, scenario);
    rmSync(sub, { recursive: true, force: true });
    mkdirSync(sub, { recursive: true });
    const stack = await startStack({ gatewayNodeArgs: ["--cpu-prof", "--cpu-prof-dir", sub] });
    if (scenario === "idle") await idle(stack, "gateway", 5000);
    else await throughput(stack, scenario, "gateway");
    await stack.stop();
    const file = readdirSync(sub).find((f) => f.endsWith(".cpuprofile"));
    if (!file) {
      log(`no profile written for ${scenario}`);
      continue;
    }
    const text = summarise(join(sub, file), 40);
    writeFileSync(join(dir, `${scenario}.txt`), `${text}\n`);
    console.log(`\n=== ${scenario} ===\n${text}`);
  }
}

/** Allocation per delivered message in the gateway, by function (sampling through the inspector). */
async function allocProfile(scenarios) {
  const dir = join(resultsDir, "profiles");
  mkdirSync(dir, { recursive: true });
  for (const scenario of scenarios) {
    const port = await freePort();
    const stack = await startStack({ gatewayNodeArgs: [`--inspect=127.0.0.1:${port}`] });
    const insp = await attach(port);
    await insp.send("HeapProfiler.enable");
    // Started after the warm-up would be better; one second of start-up traffic is in it.
    await insp.send("HeapProfiler.startSampling", { samplingInterval: 1024, includeObjectsCollectedByMinorGC: true, includeObjectsCollectedByMajorGC: true });
    const r = await throughput(stack, scenario, "gateway");
    const { profile } = await insp.send("HeapProfiler.stopSampling");
    insp.close();
    await stack.stop();
    const text = summariseAllocations(profile, r.delivered * ((durationMs + warmupMs) / durationMs), 40);
    writeFileSync(join(dir, `${scenario}.alloc.txt`), `${text}\n`);
    console.log(`\n=== ${scenario} (allocations) ===\n${text}`);
  }
}

const cleanup = async () => {
  for (const p of live) await p.stop().catch(() => {});
};
process.on("SIGINT", () => cleanup().then(() => process.exit(130)));
process.on("SIGTERM", () => cleanup().then(() => process.exit(143)));
main().then(
  () => cleanup(),
  async (e) => {
    console.error(e);
    await cleanup();
    process.exit(1);
  },
);
