// AMQP 1.0 figures: the gateway beside RabbitMQ 3.10's AMQP 1.0 plugin (Debian's package,
// started by the bench, bench/lib/rabbitmq.mjs), the same rhea load on both (2 senders ->
// 2 receivers, 128 bytes, presettled and unsettled), alternating; CPU of every process of
// each side (beam.smp with its helpers and epmd; the gateway and its nats-server). Then
// the gateway's idle AMQP connections (memory per connection, connects/s), gateway only.
import { fork } from "node:child_process";
import { join } from "node:path";
import rhea from "rhea";
import { rssKiB, sum } from "./lib/procs.mjs";
import { processName, startRabbitmq } from "./lib/rabbitmq.mjs";

const here = import.meta.dirname;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function child(spec, onOpened) {
  return new Promise((resolve, reject) => {
    const p = fork(join(here, "amqpLoadgen.mjs"), [JSON.stringify(spec)], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    let answer;
    p.on("message", (m) => {
      if (m.opened && onOpened) onOpened(m.opened, () => p.send("close"));
      else answer = m;
    });
    p.on("exit", (code) => (answer && !answer.error ? resolve(answer) : reject(new Error(answer?.error ?? `amqpLoadgen exited with ${code}`))));
  });
}

/** One presettled message there and back, or why the door does not work. */
async function probe(port) {
  const c = rhea.create_container().connect({ host: "127.0.0.1", port, reconnect: false });
  c.on("error", () => {});
  try {
    return await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no message back within 5 s")), 5_000);
      c.once("connection_error", (ctx) => reject(new Error(`connection refused: ${JSON.stringify(ctx.connection.error)}`)));
      c.once("disconnected", (ctx) => reject(new Error(`disconnected: ${ctx.error?.message ?? "by the gateway"}`)));
      c.once("connection_open", () => {
        const r = c.open_receiver({ source: { address: "bench.amqp.probe" }, snd_settle_mode: 1 });
        r.once("receiver_error", (ctx) => reject(new Error(`receiver refused: ${JSON.stringify(ctx.receiver.error)}`)));
        r.once("message", () => {
          clearTimeout(timer);
          resolve(true);
        });
        r.once("receiver_open", () => {
          const s = c.open_sender({ target: { address: "bench.amqp.probe" }, snd_settle_mode: 1 });
          s.once("sendable", () => s.send({ body: rhea.message.data_section(Buffer.from("probe")) }));
        });
      });
    });
  } finally {
    c.close();
  }
}

// The broker's processes that live as long as it does (a short-lived inet_gethost or sh
// could be gone before the run's second CPU reading).
const LONG_LIVED = new Set(["beam.smp", "erl_child_setup", "epmd"]);
const MODES = ["presettled", "unsettled"];
const AGG = ["msgsPerSec", "serverCpuUsPerMsg", "serverCores", "loadgenCores", "loadgenShareOfCpu", "machineBusy"];
const median = (xs) => {
  const v = xs.filter((x) => typeof x === "number" && Number.isFinite(x)).sort((a, b) => a - b);
  return v.length ? (v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2) : null;
};

export async function amqpBench({ stack, freshStack, durationMs, warmupMs, rounds = 1, log, idleCount = 1000 }) {
  const side = stack.sides.gateway;
  try {
    await probe(side.amqpPort);
  } catch (e) {
    return { measured: false, reason: `AMQP: not measured: the AMQP door did not pass a message (${e.message})` };
  }
  let rabbit;
  let rabbitReason;
  try {
    rabbit = await startRabbitmq();
    log(`rabbitmq ${rabbit.version} up on ${rabbit.amqpPort}: ${rabbit.pids().map(processName).join(", ")}`);
  } catch (e) {
    rabbitReason = `RabbitMQ not measured: ${e.message}`;
    log(rabbitReason);
  }
  const sides = {
    gateway: () => ({ port: side.amqpPort, pids: side.pids, pidNames: side.pidNames }),
    // The broker's processes are read again per run: the VM starts helpers as it needs them.
    ...(rabbit ? { reference: () => { const pids = rabbit.pids().filter((p) => LONG_LIVED.has(processName(p))); return { port: rabbit.amqpPort, pids, pidNames: pids.map(processName), addressStyle: "rabbitmq", username: "guest", password: "guest" }; } } : {}),
  };
  const runs = Object.fromEntries(MODES.map((m) => [m, { gateway: [], reference: [] }]));
  try {
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? ["reference", "gateway"] : ["gateway", "reference"];
      for (const mode of MODES) {
        for (const name of order) {
          if (!sides[name]) continue;
          const x = await child({ ...sides[name](), durationMs, warmupMs, pairs: 2, kind: "throughput", mode });
          runs[mode][name].push(x);
          log(`amqp ${mode.padEnd(10)} ${name.padEnd(9)} ${x.msgsPerSec.toFixed(0).padStart(7)} msg/s  ${x.serverCpuUsPerMsg?.toFixed(2)} µs/msg  loadgen ${(100 * x.loadgenShareOfCpu).toFixed(0)}% of CPU`);
          await sleep(500);
        }
      }
    }
  } finally {
    await rabbit?.stop();
  }
  const agg = (rs) => (rs.length ? { ...Object.fromEntries(AGG.map((k) => [k, median(rs.map((x) => x[k]))])), runs: rs } : undefined);
  const result = {
    measured: true,
    reference: rabbit ? { measured: true, name: `RabbitMQ ${rabbit.version} AMQP 1.0 plugin`, version: rabbit.version } : { measured: false, reason: rabbitReason },
  };
  for (const mode of MODES) result[mode] = { gateway: agg(runs[mode].gateway), reference: agg(runs[mode].reference) };

  // Idle connections on a fresh gateway, so heap freed by the runs above does not hide growth.
  const idleStack = await freshStack({ reference: false });
  const idleSide = idleStack.sides.gateway;
  await sleep(1500);
  const before = idleSide.pids.map(rssKiB);
  let idle;
  await child({ port: idleSide.amqpPort, kind: "idle", count: idleCount, concurrency: 32 }, async (opened, close) => {
    await sleep(3000);
    const after = idleSide.pids.map(rssKiB);
    const grown = after.map((a, i) => a - before[i]);
    idle = {
      count: idleCount,
      ...opened,
      connectsPerSec: opened.connected / ((opened.end - opened.start) / 1000),
      rssKiBPerConn: sum(grown, (g) => g) / Math.max(1, opened.connected),
      rssKiBPerConnByProcess: Object.fromEntries(idleSide.pidNames.map((n, i) => [n, grown[i] / Math.max(1, opened.connected)])),
    };
    close();
  });
  await idleStack.stop();
  log(`amqp idle ${idleCount}  ${idle.connectsPerSec.toFixed(0)} conn/s  ${idle.rssKiBPerConn.toFixed(1)} KiB/conn  failed ${idle.failed}`);
  result.idle = idle;
  return result;
}
