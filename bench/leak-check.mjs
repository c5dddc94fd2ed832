// Leak check (issue 8): connect and disconnect clients of one kind in a loop against the
// built gateway (run with --inspect on loopback), and compare the V8 heap after a forced
// full GC, heap snapshot class counts, and nats-server's subscription count (monitoring
// port, /connz?subs=1) after a warm-up and after more cycles. Growth per cycle that does
// not level off is a leak; growth bounded by the number of distinct client ids (stored
// sessions) is a plateau, so the ids come from a fixed pool.
//
//   node bench/leak-check.mjs --kind mqtt --cycles 1000 --warmup 300 --parallel 20 --ids 100
//
// Options: --kind mqtt|amqp (mqtt), --warmup N cycles before the first census (300),
// --cycles N cycles between the censuses (1000), --parallel P clients at a time (20),
// --ids I distinct client ids / container ids reused round-robin (100), --census (heap
// snapshot class diff; without it only heap-after-GC and NATS subscriptions are compared),
// --by-owner (census arrays, Maps, Sets and closures named by their first holder),
// --messages K (messages each cycle publishes before it disconnects, 1: per-message growth),
// --hold S with --holders N (200): instead of cycles, N idle readers of KIND (MQTT QoS 1
// subscription on a stored subject, AMQP receiver on a durable queue) stay connected; the
// heap is compared 20 s after they are up and S seconds later (growth per reader-minute).
// --nats-restarts K (with --hold): restart nats-server K times; the heap after the first
// restart is compared with the heap after the last (growth per NATS reconnect).
// One cycle: connect, MQTT: SUBSCRIBE (QoS 1) + PUBLISH QoS 1 + wait PUBACK; AMQP: attach a
// sender and a receiver on a durable queue, send one unsettled message and wait for its
// outcome; then disconnect (every other cycle abruptly).
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AckPolicy, jetstreamManager } from "@nats-io/jetstream";
import { connect as natsConnect } from "@nats-io/transport-node";
import mqttPacket from "mqtt-packet";
import rhea from "rhea";
import { attach, censusDiff, heapCensus } from "./lib/inspector.mjs";
import { freePort, natsServerBinary } from "./lib/procs.mjs";

const root = join(import.meta.dirname, "..");
const HOST = "127.0.0.1";
function option(flag, fallback) {
  const i = process.argv.indexOf(`--${flag}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}
const KIND = option("kind", "mqtt");
const WARMUP = Number(option("warmup", 300));
const CYCLES = Number(option("cycles", 1000));
const PARALLEL = Number(option("parallel", 20));
const IDS = Number(option("ids", 100));
const CENSUS = process.argv.includes("--census");
const MESSAGES = Math.max(1, Number(option("messages", 1)));
const BY_OWNER = process.argv.includes("--by-owner");
const HOLD_S = Number(option("hold", 0));
const HOLDERS = Number(option("holders", 200));
const RESTARTS = Number(option("nats-restarts", 0));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const t0 = Date.now();
const log = (...a) => console.error(`[leak ${((Date.now() - t0) / 1000).toFixed(0).padStart(4)}s]`, ...a);

const work = mkdtempSync(join(tmpdir(), "mqgw-leak-"));
const procs = [];

async function waitFor(proc, text, what) {
  await new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`${what} did not start: ${seen.slice(-2000)}`)), 30_000);
    proc.stderr.setEncoding("utf8").on("data", (c) => {
      seen = (seen + c).slice(-20_000);
      if (seen.includes(text)) {
        clearTimeout(timer);
        resolve();
      }
    });
    proc.once("exit", (code) => reject(new Error(`${what} exited with ${code}: ${seen.slice(-2000)}`)));
  });
}

const [natsPort, monPort, mqttPort, amqpPort, httpPort, inspectPort] = await Promise.all(
  Array.from({ length: 6 }, () => freePort()),
);
const natsArgs = ["-a", HOST, "-p", String(natsPort), "-m", String(monPort), "-js", "-sd", join(work, "js")];
let nats = spawn(natsServerBinary(), natsArgs, { stdio: ["ignore", "ignore", "pipe"] });
procs.push(nats);
await waitFor(nats, "Server is ready", "nats-server");
async function restartNats() {
  await new Promise((r) => {
    nats.once("exit", r);
    nats.kill("SIGTERM");
  });
  nats = spawn(natsServerBinary(), natsArgs, { stdio: ["ignore", "ignore", "pipe"] });
  procs[0] = nats;
  await waitFor(nats, "Server is ready", "nats-server");
  // Reconnects, resubscriptions and consumers coming back.
  await sleep(15_000);
}
const natsUrl = `nats://${HOST}:${natsPort}`;
const nc = await natsConnect({ servers: natsUrl });
const jsm = await jetstreamManager(nc);
await jsm.streams.add({ name: "LEAK", subjects: ["leak.>"] });
for (let q = 0; q < 10; q++)
  await jsm.consumers.add("LEAK", {
    durable_name: `q${q}`,
    ack_policy: AckPolicy.Explicit,
    filter_subject: `leak.a.${q}`,
  });

writeFileSync(
  join(work, "gateway.json"),
  JSON.stringify({
    id: "leak",
    mqtt: { listen: `${HOST}:${mqttPort}` },
    amqp: { listen: `${HOST}:${amqpPort}` },
    http: { listen: `${HOST}:${httpPort}` },
    log: { level: "warn", format: "json" },
    bindings: [{ stream: "LEAK" }],
  }),
);
const gw = spawn(
  process.execPath,
  [
    `--inspect=${HOST}:${inspectPort}`,
    join(root, "bin/mq-gateway.js"),
    "run",
    "--config",
    join(work, "gateway.json"),
    "--nats",
    natsUrl,
    "--data",
    join(work, "gw-data"),
  ],
  { stdio: ["ignore", "ignore", "pipe"], cwd: work },
);
procs.push(gw);
let gwErr = "";
gw.stderr.setEncoding("utf8").on("data", (c) => {
  gwErr = (gwErr + c).slice(-20_000);
});
for (let i = 0; ; i++) {
  const ok = await fetch(`http://${HOST}:${httpPort}/healthz`).then(
    (r) => r.ok,
    () => false,
  );
  if (ok) break;
  if (i > 300 || gw.exitCode !== null) throw new Error(`gateway did not come up: ${gwErr.slice(-3000)}`);
  await sleep(100);
}
const insp = await attach(inspectPort);
await insp.send("Runtime.enable");

async function heapAfterGc() {
  await insp.send("HeapProfiler.enable");
  await insp.send("HeapProfiler.collectGarbage");
  await insp.send("HeapProfiler.collectGarbage");
  const r = await insp.send("Runtime.getHeapUsage");
  return r.usedSize;
}
async function natsSubs() {
  const z = await fetch(`http://${HOST}:${monPort}/connz?subs=1&limit=1000`).then((r) => r.json());
  let subs = 0;
  const byConn = [];
  for (const c of z.connections ?? []) {
    subs += c.subscriptions ?? 0;
    byConn.push(`${c.name ?? c.cid}:${c.subscriptions}`);
  }
  const list = (z.connections ?? []).flatMap((c) => c.subscriptions_list ?? []);
  return { conns: z.num_connections, subs, byConn: byConn.join(" "), list };
}

// -- one cycle of each kind ------------------------------------------------------------------

let n = 0;
function mqttCycle() {
  const i = n++;
  const version = i % 2 ? 4 : 5;
  const clientId = `leak-m${i % IDS}`;
  return new Promise((resolve) => {
    const socket = net.connect(mqttPort, HOST);
    const parser = mqttPacket.parser({ protocolVersion: version });
    const send = (p) => socket.destroyed || socket.write(mqttPacket.generate(p, { protocolVersion: version }));
    const timer = setTimeout(() => socket.destroy(), 10_000);
    let done = false;
    let acked = 0;
    const publish = () =>
      send({
        cmd: "publish",
        topic: `leak/s/${(i + 1) % IDS}`,
        payload: Buffer.from(`m${i}-${acked}`),
        qos: 1,
        messageId: 2,
        retain: false,
        dup: false,
      });
    const finish = () => {
      if (done) return;
      done = true;
      if (i % 4 < 2) socket.destroy();
      else {
        send({ cmd: "disconnect" });
        socket.end();
      }
    };
    socket.on("connect", () =>
      send({
        cmd: "connect",
        protocolId: "MQTT",
        protocolVersion: version,
        clientId,
        clean: false,
        keepalive: 60,
        ...(version === 5 ? { properties: { sessionExpiryInterval: 900 } } : {}),
      }),
    );
    socket.on("data", (d) => parser.parse(d));
    parser.on("packet", (p) => {
      if (p.cmd === "connack") {
        send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: `leak/s/${i % IDS}`, qos: 1 }] });
        publish();
      } else if (p.cmd === "puback" && p.messageId === 2) {
        if (++acked >= MESSAGES) finish();
        else publish();
      } else if (p.cmd === "publish" && p.qos === 1) send({ cmd: "puback", messageId: p.messageId });
    });
    parser.on("error", () => socket.destroy());
    socket.on("error", () => {});
    socket.on("close", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

function amqpCycle() {
  const i = n++;
  const q = i % 10;
  return new Promise((resolve) => {
    const container = rhea.create_container({ id: `leak-a${i % IDS}` });
    const conn = container.connect({ host: HOST, port: amqpPort, reconnect: false, idle_time_out: 60_000 });
    let done = false;
    const gone = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      conn.socket?.destroy();
      resolve();
    };
    const timer = setTimeout(gone, 10_000);
    const finish = () => {
      if (i % 4 < 2 && conn.socket) {
        conn.socket.destroy();
        gone();
      } else conn.close();
    };
    conn.on("error", () => {});
    conn.on("connection_error", () => {});
    conn.on("connection_close", gone);
    conn.on("disconnected", gone);
    conn.on("connection_open", () => {
      const receiver = conn.open_receiver({
        source: { address: `leak.a.${q}::q${q}` },
        credit_window: 10,
        autoaccept: false,
      });
      receiver.on("message", (c) => c.delivery.accept());
      receiver.on("receiver_error", () => {});
      const sender = conn.open_sender({ target: { address: `leak.a.${q}` } });
      sender.on("sender_error", () => {});
      let sent = 0;
      let settled = 0;
      const more = () => {
        while (sent < MESSAGES && sent - settled < 10 && sender.sendable()) {
          sender.send({ body: rhea.message.data_section(Buffer.from(`a${i}-${sent}`)), message_id: `a${i}-${sent}` });
          sent++;
        }
      };
      sender.on("sendable", more);
      for (const e of ["accepted", "rejected", "released", "modified"])
        sender.on(e, () => {
          if (++settled >= MESSAGES) finish();
          else more();
        });
    });
  });
}

async function run(cycles) {
  const cycle = KIND === "amqp" ? amqpCycle : mqttCycle;
  let started = 0;
  const t = Date.now();
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      while (started < cycles) {
        started++;
        await cycle();
      }
    }),
  );
  log(`${cycles} ${KIND} cycles in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  // Let closes and lease releases settle before measuring.
  await sleep(Number(option("settle", 3)) * 1000);
}

/** AMQP readers the gateway detached during a hold, by condition. */
const detached = {};
async function hold() {
  const held = [];
  for (let i = 0; i < HOLDERS; i++) {
    if (KIND === "amqp") {
      const conn = rhea
        .create_container({ id: `leak-h${i}` })
        .connect({ host: HOST, port: amqpPort, reconnect: false, idle_time_out: 60_000 });
      conn.on("error", () => {});
      await new Promise((resolve) =>
        conn.once("connection_open", () => {
          const r = conn.open_receiver({
            source: { address: `leak.a.${i % 10}::q${i % 10}` },
            credit_window: 10,
            autoaccept: false,
          });
          r.on("receiver_error", (c) => {
            const why = c.receiver.error?.condition ?? "?";
            detached[why] = (detached[why] ?? 0) + 1;
          });
          r.once("receiver_open", resolve);
        }),
      );
      held.push(() => conn.socket?.destroy());
    } else {
      const socket = net.connect(mqttPort, HOST);
      const parser = mqttPacket.parser({ protocolVersion: 5 });
      const send = (p) => socket.write(mqttPacket.generate(p, { protocolVersion: 5 }));
      socket.on("connect", () =>
        send({
          cmd: "connect",
          protocolId: "MQTT",
          protocolVersion: 5,
          clientId: `leak-h${i}`,
          clean: true,
          keepalive: 0,
          properties: { sessionExpiryInterval: 60 },
        }),
      );
      socket.on("data", (d) => parser.parse(d));
      socket.on("error", () => {});
      await new Promise((resolve) =>
        parser.on("packet", (p) => {
          if (p.cmd === "connack")
            send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: `leak/h/${i}`, qos: 1 }] });
          else if (p.cmd === "suback") resolve();
        }),
      );
      held.push(() => socket.destroy());
    }
  }
  log(`${HOLDERS} ${KIND} readers up`);
  await sleep(20_000);
  const h1 = await heapAfterGc();
  const s1 = await natsSubs();
  const c1 = CENSUS ? await heapCensus(insp, BY_OWNER) : undefined;
  log(`heap ${(h1 / 2 ** 20).toFixed(2)} MiB, NATS subs ${s1.subs}; holding ${HOLD_S} s`);
  const tHold = Date.now();
  if (RESTARTS > 0) {
    await restartNats();
    const r1 = await heapAfterGc();
    log(`after restart 1: heap ${(r1 / 2 ** 20).toFixed(2)} MiB, NATS subs ${(await natsSubs()).subs}`);
    for (let k = 2; k <= RESTARTS; k++) {
      await restartNats();
      const rk = await heapAfterGc();
      log(`after restart ${k}: heap ${(rk / 2 ** 20).toFixed(2)} MiB, NATS subs ${(await natsSubs()).subs}`);
      if (k === RESTARTS)
        console.log(JSON.stringify({ bytes_per_nats_restart: Math.round((rk - r1) / (RESTARTS - 1)) }));
    }
  }
  await sleep(HOLD_S * 1000);
  const minutes = (Date.now() - tHold) / 60_000;
  const h2 = await heapAfterGc();
  const s2 = await natsSubs();
  const c2 = CENSUS ? await heapCensus(insp, BY_OWNER) : undefined;
  log(`heap ${(h2 / 2 ** 20).toFixed(2)} MiB, NATS subs ${s2.subs}`);
  console.log(
    JSON.stringify({
      kind: KIND,
      holders: HOLDERS,
      minutes: +minutes.toFixed(2),
      heap_mib: [h1, h2].map((h) => +(h / 2 ** 20).toFixed(2)),
      bytes_per_reader_minute: Math.round((h2 - h1) / HOLDERS / minutes),
      nats_subs: [s1.subs, s2.subs],
      ...(KIND === "amqp" ? { readers_detached: detached } : {}),
    }),
  );
  if (c1 && c2) console.log(censusDiff(c1, c2, HOLDERS, 40));
  for (const f of held) f();
}

async function cycles() {
  log(`kind ${KIND}, warm-up ${WARMUP}, cycles ${CYCLES}, parallel ${PARALLEL}, ids ${IDS}`);
  const h0 = await heapAfterGc();
  await run(WARMUP);
  const h1 = await heapAfterGc();
  const s1 = await natsSubs();
  const c1 = CENSUS ? await heapCensus(insp, BY_OWNER) : undefined;
  log(
    `after warm-up: heap ${(h1 / 2 ** 20).toFixed(2)} MiB (idle ${(h0 / 2 ** 20).toFixed(2)}), NATS subs ${s1.subs} on ${s1.conns} conns`,
  );
  await run(CYCLES);
  const h2 = await heapAfterGc();
  const s2 = await natsSubs();
  const c2 = CENSUS ? await heapCensus(insp, BY_OWNER) : undefined;
  log(`after ${CYCLES} more: heap ${(h2 / 2 ** 20).toFixed(2)} MiB, NATS subs ${s2.subs} on ${s2.conns} conns`);
  await run(CYCLES);
  const h3 = await heapAfterGc();
  const s3 = await natsSubs();
  log(`after ${CYCLES} more: heap ${(h3 / 2 ** 20).toFixed(2)} MiB, NATS subs ${s3.subs} on ${s3.conns} conns`);
  console.log(
    JSON.stringify(
      {
        kind: KIND,
        warmup: WARMUP,
        cycles: CYCLES,
        ids: IDS,
        messages_per_cycle: MESSAGES,
        heap_mib: [h0, h1, h2, h3].map((h) => +(h / 2 ** 20).toFixed(2)),
        bytes_per_cycle: [Math.round((h2 - h1) / CYCLES), Math.round((h3 - h2) / CYCLES)],
        nats_subs: [s1.subs, s2.subs, s3.subs],
        nats_subs_by_conn_end: s3.byConn,
        nats_subs_end: s3.list
          .map((x) => x.replace(/[A-Za-z0-9]{16,}/g, "#"))
          .sort()
          .join(" "),
      },
      null,
      2,
    ),
  );
  if (c1 && c2) console.log(censusDiff(c1, c2, CYCLES, 40));
}

try {
  if (HOLD_S > 0) await hold();
  else await cycles();
} finally {
  insp.close();
  await nc.close();
  for (const p of procs.reverse()) {
    p.kill("SIGTERM");
    await new Promise((r) => (p.exitCode !== null ? r() : p.once("exit", r)));
  }
}
