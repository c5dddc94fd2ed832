#!/usr/bin/env node
// `npm run bench`: mq-gateway beside nats-server's own MQTT listener, same scenarios,
// alternating sides, every figure printed for both with the ratio gateway / reference.
// Results: bench/results/latest.json and bench/results/latest.md. See docs/performance.md.
//
// Options: --rounds N (2)  --duration MS (5000)  --warmup MS (1000)  --only a,b,c (scenario
//          names: qos0 fanout m2n n2m qos1 qos1m qos1n lat0 lat1 qos0sat m2nsat n2msat idle fleet
//          amqp workers sessions; `saturating` stands for the three *sat; sessions runs only when named)
//          --sessions-n 1000,3000,10000  --sessions-mix half|311|5 (the sessions scenario: bench/sessions.mjs)
//          --sessions-sides gateway (one side only: for profiling a change, not for the table)
//          --idle 1000,5000,10000 | --idle 0   --no-amqp   --no-opt-in   --out NAME (latest)
//          --batch N (packets a write in the throughput runs, windowed and saturating: 32; experiments)
//          --profile SCENARIO[,..] (also idle, fleet0, fleet1; gateway under node --cpu-prof, summaries in
//          bench/results/profiles/)
import { fork } from "node:child_process";
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { amqpBench } from "./amqp.mjs";
import { fleetRun } from "./fleet.mjs";
import { summarise } from "./lib/cpuprofile.mjs";
import { attach, summariseAllocations } from "./lib/inspector.mjs";
import { cpuMicros, freePort, rssKiB, startGateway, startNatsServer, sum } from "./lib/procs.mjs";
import { report } from "./lib/report.mjs";
import { SATURATING, SCENARIOS } from "./lib/scenarios.mjs";
import { sessionsBench } from "./sessions.mjs";

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
    "no-opt-in": { type: "boolean", default: false },
    profile: { type: "string" },
    "alloc-profile": { type: "string" },
    out: { type: "string", default: "latest" },
    rate: { type: "string" },
    batch: { type: "string" },
    "sessions-n": { type: "string", default: "1000,3000,10000" },
    "sessions-mix": { type: "string", default: "half" },
    "sessions-sides": { type: "string", default: "reference,gateway" },
  },
});
const rounds = Number(opt.rounds);
const durationMs = Number(opt.duration);
const warmupMs = Number(opt.warmup);
const THROUGHPUT = ["qos0", "fanout", "m2n", "n2m", "qos1", "qos1m", "qos1n"];
const LATENCY = ["lat0", "lat1"];
const only = opt.only
  ? new Set(opt.only.split(",").flatMap((n) => (n === "saturating" ? SATURATING : [n])))
  : undefined;
const want = (name) => !only || only.has(name);
const idleCounts =
  opt.idle === "0"
    ? []
    : opt.idle
        .split(",")
        .map(Number)
        .filter((n) => n > 0);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const started = Date.now();
const log = (...a) => console.error(`[${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s]`, ...a);

const STORED_STREAM = "BENCH_STORED";
const live = new Set();

/**
 * The reference (nats-server with its MQTT listener) and the gateway in front of its own
 * nats-server, in its default configuration. `optIn`: a second gateway stack, side
 * "optIn", with that config (`{ mqtt: {...} }`). `workers`: the gateway run with
 * `--workers N`. `reference: false`: the gateway alone.
 */
// BENCH_GATEWAY_NODE_ARGS: extra node flags for the gateway process (experiments: heap sizes, GC).
const extraGatewayArgs = (process.env.BENCH_GATEWAY_NODE_ARGS ?? "").split(" ").filter(Boolean);
export const OPT_IN = {
  setting: "mqtt.client_id_header: when_needed",
  config: { mqtt: { client_id_header: "when_needed" } },
};
async function startStack({ gatewayNodeArgs = [], reference = true, optIn, workers } = {}) {
  gatewayNodeArgs = [...extraGatewayArgs, ...gatewayNodeArgs];
  const procs = [];
  const track = (p) => {
    live.add(p);
    procs.push(p);
    return p;
  };
  const stop = async () => {
    for (const p of procs) {
      if (p.stderr) {
        const warnings = p
          .stderr()
          .split("\n")
          .filter((l) => l.trim());
        if (warnings.length)
          log(
            `gateway stderr (last ${Math.min(5, warnings.length)} of ${warnings.length} lines):\n${warnings
              .slice(-5)
              .map((l) => l.slice(0, 400))
              .join("\n")}`,
          );
      }
    }
    for (const p of procs.reverse()) {
      await p.stop();
      live.delete(p);
      rmSync(p.dir, { recursive: true, force: true });
    }
  };
  const sides = {};
  try {
    if (reference) {
      const refMqtt = await freePort();
      const ref = track(await startNatsServer({ name: "ref", mqttPort: refMqtt }));
      sides.reference = {
        mqttPort: refMqtt,
        natsPort: ref.port,
        amqpPort: undefined,
        pids: [ref.pid],
        pidNames: ["nats-server"],
      };
    }
    const gatewaySide = async (config, n) => {
      const gwNats = track(await startNatsServer({ name: "gwnats" }));
      // The binding's stream: interest retention and file storage, like nats-server's own
      // $MQTT_msgs stream that holds the reference's QoS 1 messages.
      const nc = await connect({ servers: gwNats.url });
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: STORED_STREAM, subjects: ["stored.>"], retention: "interest", storage: "file" });
      await nc.close();
      const gw = track(
        await startGateway({ nats: gwNats, bindings: [STORED_STREAM], nodeArgs: gatewayNodeArgs, config, workers: n }),
      );
      // Read per use: with --workers the gateway's processes are the primary and its workers.
      const pidsNow = () => [...(n ? gw.pids() : [gw.pid]), gwNats.pid];
      return {
        mqttPort: gw.mqttPort,
        natsPort: gwNats.port,
        amqpPort: gw.amqpPort,
        get pids() {
          return pidsNow();
        },
        get pidNames() {
          return pidsNow().map((p, i, all) =>
            i === all.length - 1 ? "nats-server" : i === 0 ? "gateway" : `gateway worker ${i}`,
          );
        },
      };
    };
    sides.gateway = await gatewaySide({}, workers);
    if (optIn) sides.optIn = await gatewaySide(optIn.config);
  } catch (e) {
    await stop();
    throw e;
  }
  return { sides, stop };
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

async function throughput(stack, scenario, side, { warmUp = false } = {}) {
  const s = stack.sides[side];
  const saturating = SCENARIOS[scenario].saturating;
  const r = await child(saturating ? "saturate.mjs" : "loadgen.mjs", {
    scenario,
    side,
    mqttPort: s.mqttPort,
    natsPort: s.natsPort,
    pids: s.pids,
    pidNames: s.pidNames,
    durationMs: warmUp ? Math.max(500, warmupMs) : durationMs,
    warmupMs,
    rate: opt.rate ? Number(opt.rate) : undefined,
    batch: opt.batch ? Number(opt.batch) : undefined,
  });
  const f = (x, d = 0) => (x === null || x === undefined ? "-" : x.toFixed(d));
  log(
    `${scenario.padEnd(7)} ${side.padEnd(9)}${warmUp ? " (warm-up, not recorded)" : ""} ${f(r.msgsPerSec).padStart(8)} msg/s  ${f(r.serverCpuUsPerMsg, 2).padStart(6)} µs/msg` +
      (r.p50Ms !== undefined ? `  p50 ${f(r.p50Ms, 3)} ms p99 ${f(r.p99Ms, 3)} ms` : "") +
      (saturating
        ? `  offered ${f(r.offeredPerSec)}/s  lost ${r.lost} (${f(100 * r.lostShare, 1)}%)  publishers blocked ${f(100 * r.publisherBlockedShare)}%${r.saturated ? "" : " (NOT SATURATED)"}` +
          `  queued in server ${r.queuedInServer}, kernel in ${r.queuedKernelIn}` +
          `  subscriber loop ${f(100 * r.subscriberElu)}% busy, ${f(r.subscriberBacklogKiB)} KiB unread${r.subscriberBound ? " (SUBSCRIBER-BOUND)" : ""}` +
          `${r.disconnected.publishers + r.disconnected.subscribers ? `  disconnected ${JSON.stringify(r.disconnected)}` : ""}`
        : `  lost ${r.lost}`) +
      `  loadgen ${(100 * r.loadgenShareOfCpu).toFixed(0)}% of CPU  machine ${(100 * r.machineBusy).toFixed(0)}% busy`,
  );
  // After a saturating run the servers may still be collecting what the flood left behind.
  await sleep(saturating ? 1000 : 300);
  return r;
}

/** N idle clients on one side: connects/s, then RSS growth of its server processes per connection. */
let nextAddress = 2;
// A block of loopback addresses of this run's own: a run right after another reused its
// addresses, whose ports were still in TIME_WAIT, and connects/s fell to a quarter.
const ADDRESS_BLOCK = 2 + (process.pid % 250);
const WARM_CLIENTS = 300;
async function idle(stack, side, count) {
  const s = stack.sides[side];
  // Warm: the first MQTT clients make each side create what it keeps per account, and let
  // the gateway's JIT compile the connect path before it is timed (the reference's is
  // compiled ahead of time). They stay connected until the end: closed, the memory they
  // freed would be reused by the measured clients and hide part of their growth. Same on
  // both sides.
  const warm = fork(
    join(here, "idle.mjs"),
    [
      JSON.stringify({
        port: s.mqttPort,
        count: WARM_CLIENTS,
        concurrency: 16,
        localAddress: `127.${ADDRESS_BLOCK}.1.${nextAddress++}`,
        prefix: `warm-${side}`,
      }),
    ],
    { stdio: ["ignore", "inherit", "inherit", "ipc"] },
  );
  await new Promise((res) => warm.on("message", (m) => (m.opened || m.error ? res(m) : undefined)));
  await sleep(1500);
  const baseByPid = s.pids.map(rssKiB);
  const cpuBefore = s.pids.map(cpuMicros);
  const perProcess = 5000;
  const nProcs = Math.ceil(count / perProcess);
  const kids = [];
  for (let i = 0; i < nProcs; i++) {
    const n = Math.min(perProcess, count - i * perProcess);
    const spec = {
      port: s.mqttPort,
      count: n,
      concurrency: Math.ceil(128 / nProcs),
      localAddress: `127.${ADDRESS_BLOCK}.0.${nextAddress++}`,
      prefix: `idle-${side}-${count}-${i}`,
    };
    const p = fork(join(here, "idle.mjs"), [JSON.stringify(spec)], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    kids.push({ p, opened: new Promise((res) => p.on("message", (m) => (m.opened || m.error ? res(m) : undefined))) });
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
    serverCpuUsPerConnectByProcess: Object.fromEntries(
      s.pidNames.map((n, i) => [n, connectCpu[i] / Math.max(1, connected)]),
    ),
    rssKiBPerConn: sum(grown, (g) => g) / Math.max(1, connected),
    rssKiBPerConnByProcess: Object.fromEntries(s.pidNames.map((n, i) => [n, grown[i] / Math.max(1, connected)])),
    rssKiBAfter: Object.fromEntries(s.pidNames.map((n, i) => [n, rssByPid[i]])),
  };
  log(
    `idle ${String(count).padStart(5)} ${side.padEnd(9)} ${r.connectsPerSec.toFixed(0).padStart(6)} conn/s  ${r.serverCpuUsPerConnect.toFixed(0).padStart(5)} µs CPU/connect  ${r.rssKiBPerConn.toFixed(1).padStart(6)} KiB/conn` +
      `  (${Object.entries(r.rssKiBPerConnByProcess)
        .map(([n, v]) => `${n} ${v.toFixed(1)}`)
        .join(", ")})  failed ${failed}, alive ${alive}`,
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

/** `sides` in the order of round `r`: each side first as often as the others. */
const rotation = (sides, r) => sides.map((_, i) => sides[(i + r) % sides.length]);

const AGG_KEYS = [
  "msgsPerSec",
  "serverCpuUsPerMsg",
  "loadgenCores",
  "loadgenShareOfCpu",
  "machineBusy",
  "serverCores",
  "p50Ms",
  "p90Ms",
  "p99Ms",
  "lost",
  "publishedPerSec",
  "skipped",
  // saturating runs only (bench/saturate.mjs)
  "offeredPerSec",
  "lostShare",
  "publisherBlockedShare",
  "publisherElu",
  "subscriberElu",
  "publisherCores",
  "subscriberCores",
  "subscriberBacklogKiB",
  "serverCpuUsPerWritten",
  "queuedInServer",
  "queuedKernelIn",
  "serverRssKiBGrowth",
  "drainSeconds",
];
function aggregate(rs) {
  const agg = {};
  for (const k of AGG_KEYS) if (rs.some((x) => x[k] !== undefined)) agg[k] = median(rs.map((x) => x[k]));
  return { ...agg, runs: rs };
}

const OPT_IN_SCENARIOS = new Set(["qos0", "m2n", "qos0sat", "m2nsat"]);

async function main() {
  mkdirSync(resultsDir, { recursive: true });
  if (opt.profile) return profile(opt.profile.split(","));
  if (opt["alloc-profile"]) return allocProfile(opt["alloc-profile"].split(","));
  const out = {
    date: new Date().toISOString(),
    machine: {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model,
      node: process.version,
      platform: `${os.type()} ${os.release()}`,
      memGiB: os.totalmem() / 2 ** 30,
    },
    settings: {
      rounds,
      durationMs,
      warmupMs,
      payloadBytes: 128,
      mqttVersion: "3.1.1",
      gatewayConfig: "default",
      windowed: `${opt.batch ?? 32} packets a write, 4,000 messages in flight per subscriber (bench/loadgen.mjs)`,
      batch: opt.batch ? Number(opt.batch) : 32,
      saturating: `open loop: ${opt.batch ?? 32} packets a write, as fast as each publisher's socket takes them, publishers and subscribers in separate processes (bench/saturate.mjs)`,
    },
    throughput: {},
    latency: {},
    idle: {},
    optIn: null,
    fleet: null,
    workers: null,
    amqp: null,
    sessions: null,
  };

  if (idleCounts.length && want("idle")) {
    for (const [i, count] of idleCounts.entries()) {
      // A fresh pair of stacks per size: RSS growth is then not hidden by heap freed earlier.
      const stack = await startStack();
      out.idle[count] = {};
      for (const side of rotation(["reference", "gateway"], i)) out.idle[count][side] = await idle(stack, side, count);
      await stack.stop();
    }
  }

  const runs = {};
  /** Every round of `scenarios` on `stack`, the sides rotating; into `runs`. */
  const runRounds = async (stack, scenarios, withOptIn) => {
    for (let r = 0; r < rounds; r++) {
      for (const scenario of scenarios) {
        runs[scenario] ??= {};
        const sides =
          withOptIn && OPT_IN_SCENARIOS.has(scenario) ? ["reference", "gateway", "optIn"] : ["reference", "gateway"];
        for (const side of rotation(sides, r)) {
          const result = await throughput(stack, scenario, side);
          runs[scenario][side] = [...(runs[scenario][side] ?? []), result];
        }
      }
    }
  };
  const optInFor = (scenarios) => !opt["no-opt-in"] && scenarios.some((s) => OPT_IN_SCENARIOS.has(s));
  const scenarios = [...THROUGHPUT, ...LATENCY].filter(want);
  const needStack = scenarios.length > 0 || want("amqp");
  const withOptIn = optInFor(scenarios);
  const stack = needStack ? await startStack({ optIn: withOptIn ? OPT_IN : undefined }) : undefined;
  await runRounds(stack, scenarios, withOptIn);

  if (want("amqp") && !opt["no-amqp"]) {
    out.amqp = await amqpBench({ stack, freshStack: startStack, durationMs, warmupMs, rounds, log }).catch((e) => ({
      measured: false,
      reason: `AMQP: not measured: ${e.message}`,
    }));
  } else out.amqp = { measured: false, reason: "AMQP: not measured: skipped (--no-amqp or --only)" };
  await stack?.stop();

  // The saturating rows on stacks of their own, after the others: what a flood leaves
  // behind (a grown heap, queues) must not reach the windowed, latency and AMQP figures.
  const saturating = SATURATING.filter(want);
  if (saturating.length) {
    const satOptIn = optInFor(saturating);
    const satStack = await startStack({ optIn: satOptIn ? OPT_IN : undefined });
    try {
      // A fresh gateway is cold (nothing compiled yet); a user's gateway that meets a flood
      // has run for a while. One short windowed run of each base scenario per side, not
      // recorded, warms it as the windowed stack is warmed by its own earlier runs.
      for (const scenario of saturating) {
        const sides =
          satOptIn && OPT_IN_SCENARIOS.has(scenario) ? ["reference", "gateway", "optIn"] : ["reference", "gateway"];
        for (const side of sides) await throughput(satStack, SCENARIOS[scenario].base, side, { warmUp: true });
      }
      await runRounds(satStack, saturating, satOptIn);
    } finally {
      await satStack.stop();
    }
  }

  for (const [scenario, bySide] of Object.entries(runs)) {
    const target = LATENCY.includes(scenario) ? out.latency : out.throughput;
    const sc = SCENARIOS[scenario];
    target[scenario] = { title: sc.title, ...(sc.saturating ? { mode: "saturating", base: sc.base } : {}) };
    for (const [side, rs] of Object.entries(bySide)) {
      if (side === "optIn") {
        out.optIn ??= { setting: OPT_IN.setting, config: OPT_IN.config, throughput: {} };
        out.optIn.throughput[scenario] = aggregate(rs);
      } else target[scenario][side] = aggregate(rs);
    }
  }

  const why = (e) => e.message.split("\n")[0].slice(0, 300);
  if (want("fleet")) out.fleet = await fleet().catch((e) => ({ measured: false, reason: why(e) }));
  if (want("workers")) out.workers = await workersScenario().catch((e) => ({ measured: false, reason: why(e) }));
  // Minutes per N and a restart of each server: only when asked for by name (`--only sessions`).
  if (only?.has("sessions"))
    out.sessions = await sessionsBench({
      ns: opt["sessions-n"]
        .split(",")
        .map(Number)
        .filter((n) => n > 0),
      mix: opt["sessions-mix"],
      sides: opt["sessions-sides"].split(","),
      log,
    }).catch((e) => ({ measured: false, reason: why(e) }));

  out.elapsedSeconds = (Date.now() - started) / 1000;
  const { md, targets } = report(out);
  out.targets = targets;
  writeFileSync(join(resultsDir, `${opt.out}.json`), `${JSON.stringify(out, null, 2)}\n`);
  writeFileSync(join(resultsDir, `${opt.out}.md`), md);
  console.log(md);
  log(`done in ${out.elapsedSeconds.toFixed(0)} s; bench/results/${opt.out}.json and .md written`);
}

/** The fleet (bench/fleet.mjs), QoS 0 then QoS 1, both sides alternating, on a fresh stack. */
async function fleet() {
  const stack = await startStack();
  const res = {
    measured: true,
    clients: 2000,
    ratePerClient: 20,
    subscribers: 4,
    qos1Subject: "stored/fleet/<k>/<device> (the binding's stream, as the qos1 row)",
  };
  try {
    for (let r = 0; r < rounds; r++) {
      for (const qos of [0, 1]) {
        const t = (res[`qos${qos}`] ??= { reference: [], gateway: [] });
        for (const side of rotation(["reference", "gateway"], r + qos)) {
          t[side].push(
            await fleetRun({
              side: stack.sides[side],
              sideName: side,
              qos,
              durationMs,
              warmupMs: Math.max(warmupMs, 2000),
              clients: res.clients,
              ratePerClient: res.ratePerClient,
              log,
            }),
          );
        }
      }
    }
  } finally {
    await stack.stop();
  }
  for (const qos of ["qos0", "qos1"])
    for (const side of ["reference", "gateway"]) res[qos][side] = aggregate(res[qos][side]);
  res.loadgenProcesses = res.qos0.gateway.runs[0]?.loadgenProcesses;
  return res;
}

/**
 * msgs/s (QoS 0 MQTT -> MQTT) and connects/s (5,000 idle) with `run --workers 1` and `2`,
 * each beside the reference in the same stack. A gateway without the flag: not measured.
 */
const WORKER_COUNTS = [1, 2];
const WORKERS_IDLE = 5000;
async function workersScenario() {
  const res = { measured: true, counts: WORKER_COUNTS, idleCount: WORKERS_IDLE, byCount: {} };
  for (const [i, n] of WORKER_COUNTS.entries()) {
    let stack;
    try {
      stack = await startStack({ workers: n });
    } catch (e) {
      if (/unknown option '--workers'/.test(e.message))
        return { measured: false, reason: "run --workers not available" };
      throw e;
    }
    try {
      const w = { throughput: { title: SCENARIOS.qos0.title, reference: [], gateway: [] }, idle: {} };
      for (let r = 0; r < rounds; r++)
        for (const side of rotation(["reference", "gateway"], r + i))
          w.throughput[side].push(await throughput(stack, "qos0", side));
      for (const side of ["reference", "gateway"]) w.throughput[side] = aggregate(w.throughput[side]);
      for (const side of rotation(["reference", "gateway"], i)) w.idle[side] = await idle(stack, side, WORKERS_IDLE);
      w.gatewayProcesses = stack.sides.gateway.pidNames;
      res.byCount[n] = w;
    } finally {
      await stack.stop();
    }
  }
  return res;
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
    if (scenario === "fleet0" || scenario === "fleet1") {
      // 2,000 connects would fill a whole-process profile: the fleet's is taken through the
      // inspector over the measured window only.
      const port = await freePort();
      const stack = await startStack({ gatewayNodeArgs: [`--inspect=127.0.0.1:${port}`], reference: false });
      const insp = await attach(port);
      await insp.send("Profiler.enable");
      const measured = {
        start: () => insp.send("Profiler.start"),
        stop: async () =>
          writeFileSync(join(sub, "steady.cpuprofile"), JSON.stringify((await insp.send("Profiler.stop")).profile)),
      };
      await fleetRun({
        side: stack.sides.gateway,
        sideName: "gateway",
        qos: Number(scenario.at(-1)),
        durationMs,
        warmupMs: Math.max(warmupMs, 2000),
        log,
        measured,
      });
      insp.close();
      await stack.stop();
    } else {
      const stack = await startStack({ gatewayNodeArgs: ["--cpu-prof", "--cpu-prof-dir", sub], reference: false });
      if (scenario === "idle") await idle(stack, "gateway", 5000);
      else {
        // A saturating scenario: warmed first as in the bench (the profile holds that run too).
        if (SCENARIOS[scenario]?.saturating)
          await throughput(stack, SCENARIOS[scenario].base, "gateway", { warmUp: true });
        await throughput(stack, scenario, "gateway");
      }
      await stack.stop();
    }
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
    await insp.send("HeapProfiler.startSampling", {
      samplingInterval: 1024,
      includeObjectsCollectedByMinorGC: true,
      includeObjectsCollectedByMajorGC: true,
    });
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
