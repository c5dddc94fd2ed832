// AMQP 1.0 runs against the gateway (forked by bench/amqp.mjs), with rhea as the client:
//   throughput: `pairs` sender -> receiver pairs on their own subject, presettled or
//               unsettled (the sender waits for `accepted`, the receiver accepts), a window
//               of messages in flight as in loadgen.mjs;
//   idle:       `count` connections, each with a session, for connects/s and RSS.
// The same load runs against RabbitMQ (bench/lib/rabbitmq.mjs): `addressStyle: "rabbitmq"`
// and guest's credentials.
import { performance } from "node:perf_hooks";
import rhea from "rhea";
import { cpuMicros, machineTicks } from "./lib/procs.mjs";

const spec = JSON.parse(process.argv[2]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// RabbitMQ takes guest over SASL PLAIN; the gateway's default accepts a connection without SASL.
const credentials = spec.username ? { username: spec.username, password: spec.password } : {};
// The gateway's addresses are NATS subjects; RabbitMQ 3.10's plugin takes `/queue/<name>`.
const addressOf = (name) => (spec.addressStyle === "rabbitmq" ? `/queue/${name.replaceAll(".", "-")}` : name);

function open(options = {}) {
  const c = rhea.create_container().connect({ host: "127.0.0.1", port: spec.port, reconnect: false, idle_time_out: 0, ...credentials, ...options });
  c.on("error", () => {});
  return new Promise((resolve, reject) => {
    c.once("connection_open", () => resolve(c));
    c.once("connection_error", (ctx) => reject(new Error(JSON.stringify(ctx.connection.error))));
    c.once("disconnected", (ctx) => reject(new Error(`disconnected: ${ctx.error?.message ?? ""}`)));
  });
}

function attached(link, kind) {
  return new Promise((resolve, reject) => {
    link.once(`${kind}_open`, () => resolve(link));
    link.once(`${kind}_error`, (ctx) => reject(new Error(JSON.stringify(ctx[kind].error))));
  });
}

async function throughput() {
  const presettled = spec.mode === "presettled";
  const body = rhea.message.data_section(Buffer.alloc(128, 0x61));
  const window = spec.window ?? 2000;
  const unsettledMax = spec.unsettled ?? 256;
  let received = 0;
  let sent = 0;
  let accepted = 0;
  const pairs = [];
  // Declared before the links open: a sender can be sendable (and call schedule) while the next pair opens.
  let stopped = false;
  let scheduled = false;
  for (let i = 0; i < spec.pairs; i++) {
    const address = addressOf(`bench.amqp.${spec.mode}.${process.pid}.${i}`);
    const rc = await open();
    const receiver = await attached(
      rc.open_receiver({ source: { address }, snd_settle_mode: presettled ? 1 : 0, autoaccept: true, credit_window: 1000 }),
      "receiver",
    );
    receiver.on("message", () => {
      received++;
      schedule();
    });
    const sc = await open();
    const sender = await attached(sc.open_sender({ target: { address }, snd_settle_mode: presettled ? 1 : 0 }), "sender");
    sender.on("sendable", () => schedule());
    sender.on("accepted", () => {
      accepted++;
      schedule();
    });
    sender.on("rejected", () => {
      accepted++;
    });
    pairs.push({ rc, sc, sender, receiver, unsettled: () => (presettled ? 0 : sent - accepted) });
  }
  function schedule() {
    if (scheduled || stopped) return;
    scheduled = true;
    setImmediate(pump);
  }
  function pump() {
    scheduled = false;
    let progress = true;
    while (progress && !stopped) {
      progress = false;
      for (const p of pairs) {
        if (sent - received >= window) return;
        if (!presettled && sent - accepted >= unsettledMax * pairs.length) return;
        if (!p.sender.sendable()) continue;
        p.sender.send({ body });
        sent++;
        progress = true;
      }
    }
  }
  const snap = () => ({ t: performance.now(), received, serverCpu: spec.pids.map(cpuMicros), self: process.cpuUsage(), machine: machineTicks() });
  pump();
  await sleep(spec.warmupMs);
  const a = snap();
  await sleep(spec.durationMs);
  const b = snap();
  stopped = true;
  const secs = (b.t - a.t) / 1000;
  const n = b.received - a.received;
  const serverCpu = spec.pids.map((_, i) => b.serverCpu[i] - a.serverCpu[i]);
  const total = serverCpu.reduce((x, y) => x + y, 0);
  const self = b.self.user + b.self.system - a.self.user - a.self.system;
  for (const p of pairs) {
    p.rc.close();
    p.sc.close();
  }
  return {
    mode: spec.mode,
    seconds: secs,
    delivered: n,
    msgsPerSec: n / secs,
    serverCpuUsPerMsg: n ? total / n : null,
    serverCpuUsPerMsgByProcess: Object.fromEntries(spec.pidNames.map((name, i) => [name, n ? serverCpu[i] / n : null])),
    serverCores: total / 1e6 / secs,
    loadgenCores: self / 1e6 / secs,
    loadgenShareOfCpu: self / (self + total),
    machineBusy: (b.machine.busy - a.machine.busy) / (b.machine.total - a.machine.total),
  };
}

async function idle() {
  const conns = [];
  let failed = 0;
  let firstError;
  let next = 0;
  const start = performance.timeOrigin + performance.now();
  const worker = async () => {
    while (next < spec.count) {
      next++;
      try {
        const c = await open();
        c.create_session().begin();
        conns.push(c);
      } catch (e) {
        failed++;
        firstError ??= e.message;
      }
    }
  };
  await Promise.all(Array.from({ length: spec.concurrency }, worker));
  const end = performance.timeOrigin + performance.now();
  process.send({ opened: { start, end, connected: conns.length, failed, firstError } });
  await new Promise((resolve) => process.on("message", (m) => m === "close" && resolve()));
  return { closed: true }; // the process exits: the OS closes every socket
}

(spec.kind === "idle" ? idle() : throughput()).then(
  (r) => {
    process.send(r);
    setTimeout(() => process.exit(0), 50);
  },
  (e) => {
    process.send({ error: e.stack ?? String(e) });
    setTimeout(() => process.exit(1), 50);
  },
);
