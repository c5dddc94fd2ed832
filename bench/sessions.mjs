// The sessions scenario (issue 24): N devices, each a persistent MQTT session subscribed at
// QoS 1 to its own `dev/<i>/cmd` and the shared `fleet/all/#`, against the gateway on its
// embedded default (run with no nats.servers: it starts its own nats-server, on nats-server's
// default limits) and, in the same run, nats-server's own MQTT listener. Both keep QoS 1
// messages for offline sessions themselves: the gateway in its MQTT store (MQGW_MSGS, a
// consumer per session and filter), nats-server in $MQTT_msgs.
//
// The reference runs with `jetstream { limits { default_max_consumers } }` raised: nats-server
// limits each stream to 1,000 consumers by default (error 10026), which stops its MQTT at about
// 333 such sessions. The gateway's nats-server keeps its defaults.
//
// nats-server's MQTT speaks 3.1.1 only, so the reference's devices are all 3.1.1 clean
// session 0; the gateway's are half that, half MQTT 5 with Session Expiry 3600 (`mix`:
// "half", "311" or "5").
//
// Phases per side, each side in turn (the order alternating), both stacks up for the whole run:
//   1 connect + subscribe all (200 in flight)
//   2 reconnect storm: every socket destroyed, then all reconnect at once (clean start 0);
//     three in a row, the first and the median reported
//     (and again after phase 3, once each session's fleet/all/# reader delivered a message)
//   3 offline message: all dropped, one QoS 1 message to fleet/all/x, all reconnect; who got it in 30 s
//   4 consumers in the account after every phase (expected: 2 per session on the gateway)
//   5 blip: every socket destroyed and every device reconnecting at once (no pause between)
//   6 restart: SIGTERM the server (the gateway stops its nats-server with it), start it again,
//     every device reconnecting with backoff; then a live QoS 1 message to all
//   7 RSS of each side's processes after every phase
// Failures are counted and reported per phase (CONNACK codes, socket errors, the gateway's
// warnings grouped), never thrown: a phase that fails still yields its row.
import { fork, spawn } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import mqtt from "mqtt-packet";
import { cpuMicros, freePort, natsServerBinary, processName, processTree, rssKiB } from "./lib/procs.mjs";

const here = import.meta.dirname;
const root = join(here, "..");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const PER_PROCESS = 5000;
const CONNECT_IN_FLIGHT = 200;
const OFFLINE_WAIT_MS = 30_000;
/** Past the window: how much longer a device that missed the offline message is waited for (late, or lost). */
const LATE_WAIT_MS = 90_000;
/** After a drop, before the next step: the servers see the sockets go (no DISCONNECT was sent). */
const SETTLE_MS = 2000;
const REFERENCE_MAX_CONSUMERS = 1_000_000;
const CONSUMERS_SETTLE_MS = 10_000;
/** Reconnect storms in a row per side in phase 2: the table has the first and their median. */
const STORMS = 3;
/** Node flags for the gateway (e.g. `--cpu-prof --cpu-prof-dir=/tmp/p`), as `npm run bench` takes them. */
const gatewayNodeArgs = (process.env.BENCH_GATEWAY_NODE_ARGS ?? "").split(" ").filter(Boolean);
/**
 * The stream each side keeps its sessions' consumers on, and how many each session should
 * have there: the gateway one per filter (its design, docs/decisions/mqtt-store.md); nats-server
 * one per NATS subject a filter maps to (`fleet/all/#` is `fleet.all.>` and `fleet.all`), 3.
 */
export const LAYOUT = {
  gateway: { stream: "MQGW_MSGS", perSession: 2 },
  reference: { stream: "$MQTT_msgs", perSession: 3 },
};

// -- the servers -----------------------------------------------------------------------

/** A child with the open-files limit raised to the hard limit; stdout and stderr into `logFile`. */
function spawnLogged(cmd, args, logFile, cwd) {
  const fd = openSync(logFile, "a");
  const proc = spawn("bash", ["-c", 'ulimit -n "$(ulimit -Hn)"; exec "$@"', "_", cmd, ...args], {
    stdio: ["ignore", fd, fd],
    cwd,
  });
  closeSync(fd);
  return proc;
}

function listening(port) {
  return new Promise((resolve) => {
    const s = net.connect({ host: "127.0.0.1", port }, () => {
      s.destroy();
      resolve(true);
    });
    s.on("error", () => resolve(false));
  });
}

async function waitListening(port, proc, logFile, what, timeoutMs = 120_000) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (proc.exitCode !== null) throw new Error(`${what} exited with ${proc.exitCode}:\n${tail(logFile)}`);
    if (await listening(port)) return;
    await sleep(100);
  }
  throw new Error(`${what} did not listen on ${port}:\n${tail(logFile)}`);
}
const tail = (f) => readFileSync(f, "utf8").slice(-3000);

/** SIGTERM, then SIGKILL after `graceMs`; resolves with the seconds it took and how it ended. */
function terminate(proc, graceMs = 120_000) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    if (proc.exitCode !== null || proc.signalCode !== null) return resolve({ seconds: 0, killed: false });
    let killed = false;
    const t = setTimeout(() => {
      killed = true;
      proc.kill("SIGKILL");
    }, graceMs);
    proc.once("exit", () => {
      clearTimeout(t);
      resolve({ seconds: (Date.now() - t0) / 1000, killed });
    });
    proc.kill("SIGTERM");
  });
}

/**
 * A side: a server that can be stopped and started again on the same ports and data.
 * `start()` spawns, `stop()` SIGTERMs (and waits for every process of its tree).
 */
function side({ name, dir, mqttPort, natsPort, command, readyPort }) {
  const logFile = join(dir, "server.log");
  let proc;
  let tree = [];
  let logOffset = 0;
  const s = {
    name,
    dir,
    mqttPort,
    natsUrl: `nats://127.0.0.1:${natsPort}`,
    logFile,
    async start() {
      const [cmd, ...args] = command();
      proc = spawnLogged(cmd, args, logFile, dir);
      await waitListening(readyPort, proc, logFile, name);
      await waitListening(mqttPort, proc, logFile, name);
      tree = s.pids();
    },
    /** Every process of the side: the gateway and its nats-server, or the reference nats-server. */
    pids: () => (proc ? processTree(proc.pid).filter((p) => processName(p) !== "bash") : []),
    async stop(graceMs) {
      const pids = s.pids();
      const r = await terminate(proc, graceMs);
      // The gateway's nats-server goes with it; one left behind (the gateway killed) is ours to end.
      for (const p of pids) if (p !== proc.pid && alive(p)) r.leftBehind = (r.leftBehind ?? 0) + 1;
      for (const p of pids) if (p !== proc.pid && alive(p)) process.kill(p, "SIGKILL");
      return r;
    },
    /** The server's log lines since the last call, grouped (the gateway's are pino JSON). */
    newLog() {
      let text;
      try {
        text = readFileSync(logFile, "utf8");
      } catch {
        return {};
      }
      const fresh = text.slice(logOffset);
      logOffset = text.length;
      const groups = {};
      for (const line of fresh.split("\n")) {
        if (!line.trim()) continue;
        let key;
        try {
          const j = JSON.parse(line);
          const err = typeof j.err === "string" ? j.err : (j.err?.message ?? j.reason ?? "");
          key = `${j.msg}${err ? `: ${err}` : ""}`;
        } catch {
          // nats-server: only warnings and errors, without time and pid
          const m = /\[(WRN|ERR)\] (.*)$/.exec(line);
          if (!m) continue;
          key = `${m[1]} ${m[2]}`;
        }
        key = key
          .replace(/"[^"]*"/g, '"…"')
          .replace(/\d+/g, "N")
          .slice(0, 200);
        groups[key] = (groups[key] ?? 0) + 1;
      }
      return groups;
    },
    get tree() {
      return tree;
    },
  };
  return s;
}
const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function startReference() {
  const dir = mkdtempSync(join(tmpdir(), "mqgw-sessions-ref-"));
  const natsPort = await freePort();
  const mqttPort = await freePort();
  writeFileSync(
    join(dir, "server.conf"),
    [
      "server_name: ref",
      `listen: 127.0.0.1:${natsPort}`,
      `jetstream { store_dir: "${join(dir, "js")}", limits { default_max_consumers: ${REFERENCE_MAX_CONSUMERS} } }`,
      `mqtt { listen: 127.0.0.1:${mqttPort} }`,
    ].join("\n"),
  );
  const s = side({
    name: "reference",
    dir,
    mqttPort,
    natsPort,
    readyPort: natsPort,
    command: () => [natsServerBinary(), "-c", join(dir, "server.conf")],
  });
  await s.start();
  return s;
}

/** `at`: the checkout whose gateway runs (another one's, for an A/B of two builds); `http`: its metrics' address, none by default. */
/** `args`: more `run` flags (`--workers 2`, bench/sessionsWorkers.mjs). */
export async function startGatewayEmbedded(at = root, http = "", args = []) {
  const dir = mkdtempSync(join(tmpdir(), "mqgw-sessions-gw-"));
  const natsPort = await freePort();
  const mqttPort = await freePort();
  const amqpPort = await freePort();
  // The embedded default: no nats.servers, so the gateway runs nats-server itself (JetStream
  // on, its default limits). Only addresses are set, on free ports, and warnings are logged.
  writeFileSync(
    join(dir, "gateway.json"),
    JSON.stringify({
      nats: { embedded_listen: `127.0.0.1:${natsPort}` },
      mqtt: { listen: `127.0.0.1:${mqttPort}` },
      amqp: { listen: `127.0.0.1:${amqpPort}` },
      http: { listen: http },
      log: { level: process.env.BENCH_GATEWAY_LOG ?? "warn", format: "json" },
    }),
  );
  const s = side({
    name: "gateway",
    dir,
    mqttPort,
    natsPort,
    readyPort: natsPort,
    command: () => [
      process.execPath,
      ...gatewayNodeArgs,
      join(at, "bin/mq-gateway.js"),
      "run",
      "--config",
      join(dir, "gateway.json"),
      "--data",
      join(dir, "data"),
      ...args,
    ],
  });
  await s.start();
  return s;
}

// -- measurements ----------------------------------------------------------------------

/** Consumers and messages per stream in the account the MQTT clients are in ($G on the reference, CLIENTS on the gateway). */
async function consumers(s, owned) {
  let nc;
  try {
    nc = await connect({ servers: s.natsUrl, timeout: 10_000 });
    const jsm = await jetstreamManager(nc, { timeout: 30_000 });
    const byStream = {};
    const messages = {};
    for await (const st of jsm.streams.list()) {
      byStream[st.config.name] = st.state.consumer_count;
      messages[st.config.name] = st.state.messages;
    }
    // The few consumers of the other streams (the gateway's session bucket's watchers), by name.
    const others = {};
    for (const [name, count] of Object.entries(byStream)) {
      if (name === owned || count === 0 || count > 20) continue;
      others[name] = [];
      for await (const c of jsm.consumers.list(name))
        others[name].push(`${c.name}${c.config.durable_name ? "" : " (ephemeral)"}`);
    }
    return { total: Object.values(byStream).reduce((a, b) => a + b, 0), byStream, messages, others };
  } catch (e) {
    return { total: null, error: e.message };
  } finally {
    await nc?.close().catch(() => {});
  }
}

const rssMiB = (pids) => pids.reduce((a, p) => a + (alive(p) ? rssKiB(p) : 0), 0) / 1024;
export const cpuSeconds = (pids) => pids.reduce((a, p) => a + (alive(p) ? cpuMicros(p) : 0), 0) / 1e6;

/** A clean MQTT 3.1.1 session, resolved once its CONNACK accepted it: its socket and parser. */
export async function mqttPublisher(port, clientId) {
  const s = net.connect({ host: "127.0.0.1", port });
  const parser = mqtt.parser({ protocolVersion: 4 });
  s.on("data", (c) => parser.parse(c));
  try {
    await new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error("publisher: no CONNACK in 30 s")), 30_000);
      parser.once("packet", (p) => {
        clearTimeout(t);
        if (p.cmd === "connack" && p.returnCode === 0) resolve();
        else reject(new Error(`publisher: ${p.cmd} ${p.returnCode ?? ""}`));
      });
      s.once("error", reject);
      s.on("connect", () =>
        s.write(
          mqtt.generate({
            cmd: "connect",
            protocolId: "MQTT",
            protocolVersion: 4,
            clean: true,
            clientId,
            keepalive: 30,
          }),
        ),
      );
    });
  } catch (e) {
    s.destroy();
    throw e;
  }
  return { socket: s, parser };
}

/** One QoS 1 PUBLISH from a clean 3.1.1 session, resolved at its PUBACK. */
export async function publishOnce(port, topic, payload) {
  const { socket, parser } = await mqttPublisher(port, `pub-${payload}`);
  try {
    await new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error("no PUBACK in 30 s")), 30_000);
      parser.on("packet", (p) => {
        if (p.cmd !== "puback") return;
        clearTimeout(t);
        resolve();
      });
      socket.on("error", reject);
      socket.write(mqtt.generate({ cmd: "publish", topic, payload, qos: 1, messageId: 7, retain: false, dup: false }));
    });
  } finally {
    socket.destroy();
  }
}

// -- the load ------------------------------------------------------------------------------

export function loadgen(spec) {
  const p = fork(join(here, "sessionsLoadgen.mjs"), [JSON.stringify(spec)], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const waiting = new Map();
  let nextId = 1;
  let ready;
  const readyP = new Promise((r) => {
    ready = r;
  });
  p.on("message", (m) => {
    if (m.ready) return ready(m);
    const w = waiting.get(m.id);
    waiting.delete(m.id);
    if (m.error) w?.reject(new Error(m.error));
    else w?.resolve(m);
  });
  p.on("exit", (code) => {
    for (const w of waiting.values()) w.reject(new Error(`sessionsLoadgen exited with ${code}`));
  });
  return {
    ready: readyP,
    ask: (cmd, args = {}) =>
      new Promise((resolve, reject) => {
        const id = nextId++;
        waiting.set(id, { resolve, reject });
        p.send({ id, cmd, ...args });
      }),
    kill: () => p.exitCode === null && p.kill("SIGKILL"),
  };
}

/** Sums of the loadgens' tallies; times from the earliest start to the last accepted CONNACK. */
function merge(parts) {
  const out = { ok: 0, present0: 0, present1: 0, refused: {}, subackRefused: {}, errors: {} };
  for (const p of parts) {
    for (const k of [
      "ok",
      "present0",
      "present1",
      "back",
      "notBack",
      "attempts",
      "got",
      "duplicates",
      "dropped",
      "fleetGranted",
    ])
      if (p[k] !== undefined) out[k] = (out[k] ?? 0) + p[k];
    for (const k of ["refused", "subackRefused", "errors"])
      for (const [c, n] of Object.entries(p[k] ?? {})) out[k][c] = (out[k][c] ?? 0) + n;
  }
  if (parts.some((p) => p.missing)) out.missing = parts.flatMap((p) => p.missing ?? []);
  if (parts.some((p) => p.arrivals)) out.arrivals = parts.flatMap((p) => p.arrivals ?? []);
  if (parts.some((p) => p.lastAt)) out.lastAt = Math.max(...parts.map((p) => p.lastAt ?? 0));
  const starts = parts.map((p) => p.start).filter(Boolean);
  if (starts.length) {
    out.start = Math.min(...starts);
    out.lastOk = Math.max(...parts.map((p) => p.lastOk));
    out.seconds = (out.lastOk - out.start) / 1000;
    if (parts.some((p) => p.opened))
      out.openedSeconds = (Math.max(...parts.map((p) => p.opened ?? 0)) - out.start) / 1000;
    if (parts.some((p) => p.firstOk))
      out.firstOkSeconds = (Math.min(...parts.map((p) => p.firstOk ?? Infinity)) - out.start) / 1000;
    if (parts.some((p) => p.cpuSystem !== undefined))
      out.loadgenCpu = {
        user: parts.reduce((a, p) => a + (p.cpuUser ?? 0), 0),
        system: parts.reduce((a, p) => a + (p.cpuSystem ?? 0), 0),
      };
  }
  return out;
}
export const all = (gens, cmd, args) => Promise.all(gens.map((g) => g.ask(cmd, args))).then(merge);

// -- the scenario --------------------------------------------------------------------------

/** One N, both sides. */
export async function sessionsRun({
  n,
  mix = "half",
  log,
  resumeTimeoutMs = 180_000,
  only = ["reference", "gateway"],
}) {
  const tag = `s${process.pid}-${n}`;
  const sides = {};
  const gens = {};
  const res = { n, mix, referenceMix: "311", reference: { phases: {} }, gateway: { phases: {} } };
  try {
    if (only.includes("reference")) sides.reference = await startReference();
    if (only.includes("gateway")) sides.gateway = await startGatewayEmbedded();
    for (const [k, name] of ["reference", "gateway"].entries()) {
      if (!sides[name]) continue;
      const procs = Math.ceil(n / PER_PROCESS);
      gens[name] = Array.from({ length: procs }, (_, p) => {
        const indices = [];
        for (let i = p; i < n; i += procs) indices.push(i);
        return loadgen({
          port: sides[name].mqttPort,
          prefix: `${tag}-${name}`,
          indices,
          // nats-server's MQTT speaks 3.1.1 only (a version 5 CONNECT gets CONNACK 1): its devices are all 3.1.1.
          mix: name === "reference" ? "311" : mix,
          addressBlock: 100 + (process.pid % 100),
          addressSub: k * 16 + p,
        });
      });
      await Promise.all(gens[name].map((g) => g.ready));
    }
    /** After a phase: consumers, memory and the server's new warnings, on one side. */
    const after = async (name, phase, r) => {
      const s = sides[name];
      // A resume makes a session's new consumer before it deletes the old one: counted at
      // once, a count above the design may be a delete still on its way. Counted again until
      // it matches (10 s at most), and both counts kept.
      const { stream, perSession } = LAYOUT[name];
      const expected = perSession * n;
      const owned = (c) => c.byStream?.[stream] ?? null;
      const first = await consumers(s, stream);
      let c = first;
      for (const until = Date.now() + CONSUMERS_SETTLE_MS; owned(c) !== expected && Date.now() < until; ) {
        await sleep(1000);
        c = await consumers(s, stream);
      }
      r.consumers = { ...c, stream, expected, ownedAtOnce: owned(first) };
      if (c.byStream) {
        r.consumers.owned = owned(c);
        r.consumers.orphans = r.consumers.owned - expected;
      }
      r.rssMiB = rssMiB(s.pids());
      r.serverLog = s.newLog();
      res[name].phases[phase] = r;
      const f = (x, d = 1) => (x == null ? "-" : x.toFixed(d));
      log(
        `sessions ${n} ${phase.padEnd(8)} ${name.padEnd(9)} ${f(r.seconds)} s  ok ${r.ok ?? "-"}  present0 ${r.present0 ?? "-"}${r.openedSeconds !== undefined ? ` (load generator: opened ${f(r.openedSeconds)} s, first ok ${f(r.firstOkSeconds)} s, cpu user ${f(r.loadgenCpu?.user)} sys ${f(r.loadgenCpu?.system)})` : ""}` +
          `${r.got !== undefined ? `  got ${r.got}/${n} dup ${r.duplicates}` : ""}` +
          `${Object.keys(r.refused ?? {}).length ? `  refused ${JSON.stringify(r.refused)}` : ""}` +
          `${Object.keys(r.errors ?? {}).length ? `  errors ${JSON.stringify(r.errors)}` : ""}` +
          `  consumers ${r.consumers.owned ?? r.consumers.error} (expected ${perSession * n})  RSS ${f(r.rssMiB, 0)} MiB`,
      );
      const warn = Object.entries(r.serverLog).sort((a, b) => b[1] - a[1]);
      if (warn.length)
        log(
          `  ${name} log: ${warn
            .slice(0, 4)
            .map(([k, v]) => `${v}× ${k}`)
            .join(" | ")}`,
        );
    };
    // One side alone (`--sessions-sides gateway`) is for profiling a change, not for the table.
    const order = (i) => (i % 2 ? ["gateway", "reference"] : ["reference", "gateway"]).filter((name) => sides[name]);
    const timed = async (name, f) => {
      const pids = sides[name].pids();
      const cpu0 = cpuSeconds(pids);
      const r = await f();
      r.serverCpuSeconds = cpuSeconds(pids) - cpu0;
      return r;
    };

    // 1 connect + subscribe
    for (const name of order(0)) {
      const r = await timed(name, () =>
        all(gens[name], "connect", {
          concurrency: Math.ceil(CONNECT_IN_FLIGHT / gens[name].length),
          timeoutMs: 60_000,
        }),
      );
      await after(name, "connect", r);
    }
    // 2 reconnect storms, STORMS in a row on each side. The first is the one a fleet meets
    // right after it connected (V8 has not yet compiled the gateway's resume path); the later
    // ones what a server that has served resumes meets. One build's storms vary up to twofold
    // on a 2-core machine (docs/performance.md), so the table gives the first and the median.
    for (const name of order(1)) {
      const storms = [];
      for (let k = 0; k < STORMS; k++) {
        await all(gens[name], "drop");
        await sleep(SETTLE_MS);
        storms.push(await timed(name, () => all(gens[name], "reconnect", { timeoutMs: resumeTimeoutMs })));
      }
      log(`sessions ${n} storms   ${name.padEnd(9)} ${storms.map((x) => x.seconds?.toFixed(1)).join(" / ")} s`);
      const repeats = storms.map(({ seconds, serverCpuSeconds, ok, present0, present1 }) => ({
        seconds,
        serverCpuSeconds,
        ok,
        present0,
        present1,
      }));
      await after(name, "storm", { ...storms[0], repeats });
    }
    // 3 a QoS 1 message while all are away
    for (const name of order(2)) {
      await all(gens[name], "drop");
      await sleep(SETTLE_MS);
      const mark = `offline-${tag}-${name}`;
      let published;
      try {
        await publishOnce(sides[name].mqttPort, "fleet/all/x", mark);
        published = true;
      } catch (e) {
        published = e.message;
      }
      const r = await timed(name, () => all(gens[name], "reconnect", { timeoutMs: OFFLINE_WAIT_MS }));
      const left = Math.max(0, OFFLINE_WAIT_MS - (Date.now() - r.start));
      const m = await all(gens[name], "await", { mark, timeoutMs: left });
      // Late or lost: those that missed the window are waited for LATE_WAIT_MS more, and the last arrival timed.
      const late = m.got < n ? await all(gens[name], "await", { mark, timeoutMs: LATE_WAIT_MS }) : m;
      await after(name, "offline", {
        ...r,
        published,
        mark,
        got: m.got,
        gotLate: late.got,
        lastSeconds: late.lastAt ? (late.lastAt - r.start) / 1000 : undefined,
        duplicates: late.duplicates,
      });
    }
    // 4 a storm again, now that each session's fleet/all/# reader has delivered a message
    // (the server pinned it): the gateway parks such readers at a drop and a resume there
    // adopts them (docs/decisions/session-parking.md); its dev/<i>/cmd readers never delivered.
    for (const name of order(3)) {
      await all(gens[name], "drop");
      await sleep(SETTLE_MS);
      const r = await timed(name, () => all(gens[name], "reconnect", { timeoutMs: resumeTimeoutMs }));
      await after(name, "storm2", r);
    }
    // 5 a blip: every socket destroyed and every device reconnecting at once, as a network
    // blip does: the server sees the drops and the resumes together (the storms above let
    // it settle the drops first).
    for (const name of order(4)) {
      await sleep(SETTLE_MS);
      const r = await timed(name, async () => {
        await all(gens[name], "drop");
        return all(gens[name], "reconnect", { timeoutMs: resumeTimeoutMs });
      });
      await after(name, "blip", r);
    }
    // 6 restart with every device reconnecting
    for (const name of order(5)) {
      const s = sides[name];
      const resumed = all(gens[name], "resume", { timeoutMs: resumeTimeoutMs });
      const t0 = Date.now();
      const stopped = await s.stop();
      const stopSeconds = stopped.seconds;
      const t1 = Date.now();
      let startError;
      await s.start().catch((e) => {
        startError = e.message.slice(0, 500);
      });
      const startSeconds = (Date.now() - t1) / 1000;
      const r = await resumed;
      // From the SIGTERM to the last device back (accepted CONNACK).
      r.seconds = r.back ? (r.lastOk - t0) / 1000 : null;
      Object.assign(r, {
        stopSeconds,
        killed: stopped.killed,
        leftBehind: stopped.leftBehind ?? 0,
        startSeconds,
        startError,
      });
      // Anything the restart sends again of the offline message is a duplicate; then a live one to all.
      await sleep(SETTLE_MS);
      r.offlineDuplicates = (await all(gens[name], "marks", { mark: `offline-${tag}-${name}` })).duplicates;
      const mark = `live-${tag}-${name}`;
      try {
        await publishOnce(s.mqttPort, "fleet/all/x", mark);
        const m = await all(gens[name], "await", { mark, timeoutMs: OFFLINE_WAIT_MS });
        r.liveGot = m.got;
        r.liveDuplicates = m.duplicates;
      } catch (e) {
        r.liveGot = 0;
        r.livePublishError = e.message;
      }
      await after(name, "restart", r);
    }
  } finally {
    for (const g of Object.values(gens).flat()) g.kill();
    for (const s of Object.values(sides)) {
      await s.stop(20_000).catch(() => {});
      rmSync(s.dir, { recursive: true, force: true });
    }
  }
  return res;
}

/** Every N in turn, a fresh pair of stacks each. */
export async function sessionsBench({ ns, mix, log, sides }) {
  const out = { measured: true, ns, mix, referenceMaxConsumers: REFERENCE_MAX_CONSUMERS, byN: {} };
  for (const n of ns) {
    try {
      out.byN[n] = await sessionsRun({ n, mix, log, only: sides });
    } catch (e) {
      log(`sessions ${n}: ${e.stack}`);
      out.byN[n] = { n, measured: false, reason: e.message.split("\n")[0].slice(0, 300) };
    }
  }
  return out;
}
