// AMQP 1.0 figures for the gateway alone: nats-server speaks no AMQP, so there is no
// reference; the figures are the ones a RabbitMQ user compares (msgs/s presettled and
// unsettled, CPU per message, memory per connection, connects/s).
import { fork } from "node:child_process";
import { join } from "node:path";
import rhea from "rhea";
import { rssKiB, sum } from "./lib/procs.mjs";

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

export async function amqpBench({ stack, freshStack, durationMs, warmupMs, log, idleCount = 1000 }) {
  const side = stack.sides.gateway;
  try {
    await probe(side.amqpPort);
  } catch (e) {
    return { measured: false, reason: `AMQP: not measured: the AMQP door did not pass a message (${e.message})` };
  }
  const base = { port: side.amqpPort, pids: side.pids, pidNames: side.pidNames, durationMs, warmupMs, pairs: 2 };
  const pre = await child({ ...base, kind: "throughput", mode: "presettled" });
  log(`amqp presettled  ${pre.msgsPerSec.toFixed(0)} msg/s  ${pre.serverCpuUsPerMsg?.toFixed(2)} µs/msg  loadgen ${(100 * pre.loadgenShareOfCpu).toFixed(0)}% of CPU`);
  await sleep(500);
  const uns = await child({ ...base, kind: "throughput", mode: "unsettled" });
  log(`amqp unsettled   ${uns.msgsPerSec.toFixed(0)} msg/s  ${uns.serverCpuUsPerMsg?.toFixed(2)} µs/msg  loadgen ${(100 * uns.loadgenShareOfCpu).toFixed(0)}% of CPU`);
  await sleep(500);

  // Idle connections on a fresh gateway, so heap freed by the runs above does not hide growth.
  const idleStack = await freshStack();
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
  const f = (x, d) => (x == null ? "-" : x.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d }));
  return {
    measured: true,
    presettled: pre,
    unsettled: uns,
    idle,
    rows: [
      ["presettled, 2 senders -> 2 receivers (AMQP -> NATS -> AMQP): msgs/s", f(pre.msgsPerSec, 0)],
      ["presettled: server CPU µs/msg (gateway + nats-server)", f(pre.serverCpuUsPerMsg, 2)],
      ["unsettled (accepted before the next window), same shape: msgs/s", f(uns.msgsPerSec, 0)],
      ["unsettled: server CPU µs/msg", f(uns.serverCpuUsPerMsg, 2)],
      [`${idleCount.toLocaleString("en-US")} idle AMQP connections (one session each): RSS KiB/conn`, f(idle.rssKiBPerConn, 1)],
      [`${idleCount.toLocaleString("en-US")} idle AMQP connections: connects/s`, f(idle.connectsPerSec, 0)],
      ["load generator (rhea) share of CPU, presettled / unsettled", `${f(100 * pre.loadgenShareOfCpu, 0)}% / ${f(100 * uns.loadgenShareOfCpu, 0)}%`],
    ],
  };
}
