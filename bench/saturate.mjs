// One saturating run (a `*sat` scenario) against one side, forked by bench/run.mjs.
//
// Open loop: the publishers offer load with no window, as fast as their sockets take it
// (32 pre-encoded packets a write, more writes until `write()` says the socket is full,
// then the next write on `drain`), so what holds them back is the server's reading, not
// the load generator. The subscribers run in this process and the publishers in a child
// of it: the publishers' busy loop cannot delay the subscribers' reads, and each side's
// event-loop use and CPU are measured apart (a subscriber that cannot keep up would show
// here as a busy event loop, not as the server's loss).
//
// Reports, over the measured window: messages delivered to the subscribers per second,
// messages offered (written) per second, server CPU (/proc, as loadgen.mjs counts it) per
// delivered message, and whether the server or the load set the pace (how long the
// publishers' sockets were full; the subscribers' event-loop use and unread bytes); at
// the window's ends, where the messages written and not yet delivered are (the kernel on
// the way in or out, or inside the server); over the whole run: messages written and
// never delivered ("lost", after the publishers stop and delivery settles).
import { execFileSync, fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { encode, RawMqtt, repeat } from "./lib/mqttWire.mjs";
import { encodePub, RawNats } from "./lib/natsWire.mjs";
import { cpuMicros, machineTicks, rssKiB } from "./lib/procs.mjs";
import { SCENARIOS } from "./lib/scenarios.mjs";

const PAYLOAD = 128;
const HOST = "127.0.0.1";
/** Writes a publisher makes in one event-loop turn before yielding (when the socket keeps taking them). */
const WRITES_PER_TURN = 16;
/** A subscriber whose event loop is busier than this over the window may be what limits delivery. */
const SUBSCRIBER_BOUND_ELU = 0.9;
/** Publishers whose sockets were full less than this share of the window did not saturate the server. */
const SATURATED_BLOCKED_SHARE = 0.5;

/** Subscriber backlog (bytes the kernel holds for them, unread) above this on average: they may be what limits delivery. */
const SUBSCRIBER_BOUND_BACKLOG = 1024 * 1024;

/** Bytes received by the kernel and not yet read (Recv-Q) on the client sockets `[localPort, serverPort]`, from /proc/net/tcp. */
function unreadBytes(clients) {
  const ours = new Set(clients.map(([l, r]) => `${l}:${r}`));
  const port = (field) => Number.parseInt(field.slice(field.indexOf(":") + 1), 16);
  let unread = 0;
  const lines = readFileSync("/proc/net/tcp", "utf8").split("\n");
  for (let i = 1; i < lines.length; i++) {
    const f = lines[i].trim().split(/\s+/);
    if (f.length > 4 && ours.has(`${port(f[1])}:${port(f[2])}`)) unread += port(f[4]);
  }
  return unread;
}

/**
 * Per established TCP socket on `ports` (as `local:peer`): Recv-Q, bytes received in all,
 * bytes written by its process and not yet sent (`notsent`), from `ss -tin`.
 */
function tcpInfo(ports) {
  const filter = ["("];
  for (const [i, p] of [...ports].entries())
    filter.push(...(i ? ["or"] : []), "sport", "=", `:${p}`, "or", "dport", "=", `:${p}`);
  filter.push(")");
  let out;
  try {
    out = execFileSync("ss", ["-tinH", "state", "established", ...filter], { encoding: "utf8" });
  } catch {
    return null; // no ss (iproute2) here: where the queued messages are is left unknown
  }
  const info = new Map();
  let key;
  for (const line of out.split("\n")) {
    if (!line.trim()) continue;
    if (!/^\s/.test(line)) {
      // Recv-Q Send-Q Local:Port Peer:Port (state left out by the filter)
      const f = line.trim().split(/\s+/);
      const at = (a) => a.slice(a.lastIndexOf(":") + 1);
      key = `${at(f[2])}:${at(f[3])}`;
      info.set(key, { recvQ: Number(f[0]), received: 0, notsent: 0 });
    } else if (key) {
      const e = info.get(key);
      e.received = Number(/bytes_received:(\d+)/.exec(line)?.[1] ?? 0);
      e.notsent = Number(/notsent:(\d+)/.exec(line)?.[1] ?? 0);
    }
  }
  return info;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const eluBetween = (a, b) => {
  const active = b.active - a.active;
  const all = active + b.idle - a.idle;
  return all > 0 ? active / all : null;
};

/** Waits until `value()` stops changing for `quietMs` (or `maxMs` passes); returns whether it settled. */
async function settle(value, quietMs, maxMs) {
  const until = performance.now() + maxMs;
  let last = value();
  let since = performance.now();
  while (performance.now() < until) {
    await sleep(20);
    const v = value();
    if (v !== last) {
      last = v;
      since = performance.now();
    } else if (performance.now() - since >= quietMs) return true;
  }
  return false;
}

// -- the publishers (child process) -------------------------------------------------

async function publishers(spec) {
  const sc = SCENARIOS[spec.scenario];
  const batch = spec.batch ?? 32;
  const payload = Buffer.alloc(PAYLOAD, 0x61);
  const tag = `${spec.side}-${spec.scenario}-${process.pid}`;
  const pubs = [];
  for (const [i, p] of sc.pubs.entries()) {
    const pub = { blockedSince: null, blockedMs: 0, closed: false };
    if (p.kind === "mqtt") {
      pub.conn = await new RawMqtt({ host: HOST, port: spec.mqttPort, clientId: `${tag}-pub${i}` }).connect();
      pub.batch = repeat(encode.publish(p.topics[0], payload, 0), batch);
    } else {
      pub.conn = await new RawNats({ host: HOST, port: spec.natsPort }).connect();
      pub.batch = Buffer.concat(
        Array.from({ length: batch }, (_, k) => encodePub(p.topics[k % p.topics.length], payload)),
      );
    }
    const s = pub.conn.socket;
    s.on("drain", () => {
      if (pub.blockedSince !== null) pub.blockedMs += performance.now() - pub.blockedSince;
      pub.blockedSince = null;
      schedule();
    });
    s.on("close", () => {
      pub.closed = true;
    });
    s.on("error", () => {});
    pubs.push(pub);
  }

  let sent = 0;
  let stopped = false;
  // Held for a snapshot: no write until the coordinator has counted (see `snap` in run()).
  let held = false;
  let scheduled = false;
  function schedule() {
    if (scheduled || stopped) return;
    scheduled = true;
    setImmediate(pump);
  }
  function pump() {
    scheduled = false;
    if (stopped || held) return;
    let open = false;
    for (const pub of pubs) {
      if (pub.blockedSince !== null || pub.closed) continue;
      for (let k = 0; k < WRITES_PER_TURN; k++) {
        sent += batch; // a write that returns false is still taken (buffered)
        if (!pub.conn.socket.write(pub.batch)) {
          pub.blockedSince = performance.now();
          break;
        }
      }
      if (pub.blockedSince === null) open = true;
    }
    // A publisher whose socket still takes writes goes on next turn; a blocked one on `drain`.
    if (open) schedule();
  }
  const blockedMs = () => {
    const now = performance.now();
    let ms = 0;
    for (const p of pubs) ms += p.blockedMs + (p.blockedSince === null ? 0 : now - p.blockedSince);
    return ms;
  };

  /** Bytes written and still in this process's socket buffers. */
  const unwritten = () => pubs.reduce((n, p) => n + (p.closed ? 0 : p.conn.socket.writableLength), 0);

  process.on("message", async (m) => {
    if (m === "go") schedule();
    else if (m === "resume") {
      held = false;
      schedule();
    } else if (m === "snap") {
      held = true;
      process.send({
        snap: {
          // CLOCK_MONOTONIC, the same clock in both processes: the publishers' figures are over their own interval.
          at: Number(process.hrtime.bigint() / 1000n) / 1000,
          sent,
          unwritten: unwritten(),
          blockedMs: blockedMs(),
          elu: performance.eventLoopUtilization(),
        },
      });
    } else if (m === "stop") {
      stopped = true;
      // What was written but is still in this process's buffers goes out before the count is final.
      const until = performance.now() + 15_000;
      while (unwritten() > 0 && performance.now() < until) await sleep(10);
      const flushed = unwritten() === 0;
      process.send({ stopped: { sent, flushed, closedByServer: pubs.filter((p) => p.closed).length } });
    } else if (m === "close") {
      for (const p of pubs) p.conn.close();
      setTimeout(() => process.exit(0), 50);
    }
  });
  process.send({
    ready: {
      clients: pubs.map((p) => [p.conn.socket.localPort, p.conn.socket.remotePort]),
      packetBytes: pubs[0].batch.length / batch,
    },
  });
}

// -- the subscribers and the measurement (this process) -----------------------------

async function run(spec) {
  const sc = SCENARIOS[spec.scenario];
  const tag = `${spec.side}-${spec.scenario}-${process.pid}`;
  const subs = [];
  let subsClosed = 0;
  let subBytes = 0;
  for (const [i, s] of sc.subs.entries()) {
    const c =
      s.kind === "mqtt"
        ? await new RawMqtt({ host: HOST, port: spec.mqttPort, clientId: `${tag}-sub${i}` }).connect()
        : await new RawNats({ host: HOST, port: spec.natsPort }).connect();
    if (s.kind === "mqtt") await c.subscribe(s.filter, 0);
    else await c.subscribe(s.filter, i + 1);
    c.socket.on("close", () => subsClosed++);
    c.socket.on("data", (chunk) => {
      subBytes += chunk.length;
    });
    subs.push(c);
  }
  const delivered = () => {
    let n = 0;
    for (const s of subs) n += s.received;
    return n;
  };

  const child = fork(import.meta.filename, [JSON.stringify({ ...spec, role: "publishers" })], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const waiting = new Map();
  const next = (key) => new Promise((resolve) => waiting.set(key, resolve));
  child.on("message", (m) => {
    for (const key of Object.keys(m)) {
      const w = waiting.get(key);
      waiting.delete(key);
      w?.(m[key]);
    }
  });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const { clients: pubClients, packetBytes } = await Promise.race([
    next("ready"),
    exited.then((code) => Promise.reject(new Error(`publishers exited with ${code}`))),
  ]);

  const subClients = subs.map((c) => [c.socket.localPort, c.socket.remotePort]);
  const serverPorts = new Set([...pubClients, ...subClients].map(([, r]) => r));
  /**
   * The publishers stop writing and report their count; then, with the count fixed and this
   * process not reading (ss runs synchronously), deliveries and the kernel's queues are read
   * at one moment; then the publishers go on. The server keeps working from the kernel's
   * buffers meanwhile (tens of milliseconds), so the pause does not unload it.
   */
  const snap = async () => {
    const reply = next("snap");
    child.send("snap");
    const pub = await reply;
    const s = {
      pub,
      delivered: delivered(),
      subBytes,
      tcp: tcpInfo(serverPorts),
      t: performance.now(),
      serverCpu: spec.pids.map(cpuMicros),
      self: process.cpuUsage(),
      pubCpu: cpuMicros(child.pid),
      machine: machineTicks(),
      elu: performance.eventLoopUtilization(),
      rss: spec.pids.map(rssKiB),
    };
    child.send("resume");
    return s;
  };
  /**
   * Messages written and not delivered at `s`, by where they are: in the publishers'
   * buffers or the kernel on their way in, in the kernel on their way out, and the rest
   * inside the server (its own queues).
   */
  const whereAt = (s) => {
    if (!s.tcp) return null;
    // Read by the server: what its ends of the publishers' connections received, less what they have not read.
    let readBytes = 0;
    for (const [l, r] of pubClients) {
      const e = s.tcp.get(`${r}:${l}`);
      if (e) readBytes += e.received - e.recvQ;
    }
    const read = Math.round(readBytes / packetBytes);
    // On the way out: what the subscribers' kernel holds unread and what the server wrote that is not sent yet.
    let outBytes = 0;
    for (const [l, r] of subClients)
      outBytes += (s.tcp.get(`${l}:${r}`)?.recvQ ?? 0) + (s.tcp.get(`${r}:${l}`)?.notsent ?? 0);
    const bytesPerDelivered = s.delivered > 0 ? s.subBytes / s.delivered : packetBytes;
    const kernelOut = Math.round(outBytes / bytesPerDelivered);
    return {
      written: s.pub.sent,
      read,
      delivered: s.delivered,
      kernelIn: s.pub.sent - read,
      kernelOut,
      inServer: read * sc.fanout - s.delivered - kernelOut,
    };
  };

  // The subscribers' backlog in the kernel, sampled through the window: a reader that keeps
  // up leaves little there; one that does not leaves its socket's buffer full.
  const backlog = [];

  child.send("go");
  await sleep(spec.warmupMs);
  const a = await snap();
  const sampler = setInterval(() => backlog.push(unreadBytes(subClients)), 100);
  await sleep(spec.durationMs);
  clearInterval(sampler);
  const b = await snap();
  const stoppedReply = next("stopped");
  const stopAt = performance.now();
  child.send("stop");
  const stopped = await stoppedReply;
  // Delivery after the publishers stop: what is still queued anywhere arrives, or never does.
  const settled = await settle(delivered, 500, 15_000);
  // Less the 500 ms of quiet that ends the wait: how long what was queued took to come out.
  const drainSeconds = Math.max(0, (performance.now() - stopAt - 500) / 1000);
  const deliveredTotal = delivered();
  const subsClosedByServer = subsClosed;
  child.send("close");
  await exited;
  for (const c of subs) c.close();

  const secs = (b.t - a.t) / 1000;
  const n = b.delivered - a.delivered;
  const serverCpu = spec.pids.map((_, i) => b.serverCpu[i] - a.serverCpu[i]);
  const totalServer = serverCpu.reduce((x, y) => x + y, 0);
  const subCpu = b.self.user + b.self.system - a.self.user - a.self.system;
  const pubCpu = b.pubCpu - a.pubCpu;
  const mt = { busy: b.machine.busy - a.machine.busy, total: b.machine.total - a.machine.total };
  const written = stopped.sent * sc.fanout;
  const subscriberElu = performance.eventLoopUtilization(b.elu, a.elu).utilization;
  const backlogMean = backlog.length ? backlog.reduce((x, y) => x + y, 0) / backlog.length : null;
  const pubSecs = (b.pub.at - a.pub.at) / 1000;
  const blockedShare = (b.pub.blockedMs - a.pub.blockedMs) / (sc.pubs.length * pubSecs * 1000);
  return {
    side: spec.side,
    scenario: spec.scenario,
    mode: "saturating",
    seconds: secs,
    delivered: n,
    msgsPerSec: n / secs,
    published: b.pub.sent - a.pub.sent,
    offeredPerSec: (b.pub.sent - a.pub.sent) / pubSecs,
    serverCpuUsPerMsg: n > 0 ? totalServer / n : null,
    // Per message written (taken in) rather than delivered: the two differ by what a server queued in the window.
    serverCpuUsPerWritten: b.pub.sent > a.pub.sent ? totalServer / ((b.pub.sent - a.pub.sent) * sc.fanout) : null,
    serverCpuUsPerMsgByProcess: Object.fromEntries(
      spec.pidNames.map((name, i) => [name, n > 0 ? serverCpu[i] / n : null]),
    ),
    serverCores: totalServer / 1e6 / secs,
    // Growth over the window: messages read and not yet delivered are held somewhere.
    serverRssKiBGrowth: b.rss.reduce((x, y) => x + y, 0) - a.rss.reduce((x, y) => x + y, 0),
    serverRssKiBGrowthByProcess: Object.fromEntries(spec.pidNames.map((name, i) => [name, b.rss[i] - a.rss[i]])),
    loadgenCores: (subCpu + pubCpu) / 1e6 / secs,
    loadgenShareOfCpu: (subCpu + pubCpu) / (subCpu + pubCpu + totalServer),
    publisherCores: pubCpu / 1e6 / secs,
    subscriberCores: subCpu / 1e6 / secs,
    // Share of the window the publishers' sockets were full (waiting for `drain`): near 1, the server set the pace.
    publisherBlockedShare: blockedShare,
    saturated: blockedShare >= SATURATED_BLOCKED_SHARE,
    publisherElu: eluBetween(a.pub.elu, b.pub.elu),
    subscriberElu,
    subscriberBacklogKiB: backlogMean === null ? null : backlogMean / 1024,
    subscriberBacklogMaxKiB: backlog.length ? Math.max(...backlog) / 1024 : null,
    // A subscriber the server closed (slow consumer) did not keep up either.
    subscriberBound:
      subscriberElu > SUBSCRIBER_BOUND_ELU || backlogMean > SUBSCRIBER_BOUND_BACKLOG || subsClosedByServer > 0,
    machineBusy: mt.total > 0 ? mt.busy / mt.total : null,
    // The whole run (warm-up, window, and what was delivered after the publishers stopped).
    written,
    deliveredTotal,
    lost: Math.max(0, written - deliveredTotal),
    lostShare: written > 0 ? Math.max(0, written - deliveredTotal) / written : null,
    settled: settled && stopped.flushed,
    drainSeconds,
    // Messages written and not yet delivered at the window's start and end, and where they were.
    queued: { start: whereAt(a), end: whereAt(b) },
    queuedInServer: whereAt(b)?.inServer ?? null,
    queuedKernelIn: whereAt(b)?.kernelIn ?? null,
    disconnected: { publishers: stopped.closedByServer, subscribers: subsClosedByServer },
  };
}

const spec = JSON.parse(process.argv[2]);
if (spec.role === "publishers") {
  publishers(spec).catch((e) => {
    console.error(e);
    process.exit(1);
  });
} else {
  run(spec).then(
    (r) => {
      process.send?.(r);
      setTimeout(() => process.exit(0), 50);
    },
    (e) => {
      process.send?.({ error: e.stack ?? String(e) });
      setTimeout(() => process.exit(1), 50);
    },
  );
}
