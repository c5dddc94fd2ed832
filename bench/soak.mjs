// Soak (issue 8, item 5): N MQTT and N AMQP clients through the built gateway for M
// minutes, with random disconnects and a nats-server restart, on loopback only. Every
// client publishes stored QoS 1 / unsettled messages and some read them back; at the
// end the stream is read to check that nothing acknowledged was lost.
//
//   npm run soak -- --clients 200 --minutes 2
//   SOAK_CLIENTS=2000 SOAK_MINUTES=10 npm run soak
//
// Options (flag or env): --clients N (SOAK_CLIENTS, per protocol, 100), --minutes M
// (SOAK_MINUTES, 2), --rate R (SOAK_RATE, messages per client per minute, 12),
// --disconnects D (SOAK_DISCONNECTS, % of clients dropped per minute, 10),
// --nats-restart-at F (SOAK_NATS_RESTART_AT, fraction of the run, 0.4; 0 = none),
// --out FILE (SOAK_OUT, JSON report; default bench/results/soak-latest.json).
// --gc-every S (SOAK_GC_EVERY, seconds, 60; 0 = off): the gateway runs with --inspect on
// loopback; every S seconds the script forces a full GC through the inspector and records
// the V8 heap used after it (plus external and ArrayBuffer memory). The verdict line says
// whether memory is flat: heap-after-GC grew less than --flat-pct (SOAK_FLAT_PCT, 10) %
// between the first and last sample of the run's second half; the RSS slope over the
// second half (MiB/min) is reported beside it. The forced GCs also lower RSS a little.
// --census (SOAK_CENSUS=1): heap snapshot class counts at minute 3 (or mid-run if shorter)
// and at the end, and what grew between them, per client (costly: seconds of pause and
// about 3x the heap in the script's memory; for runs up to a few hundred clients).
// SOAK_GW_LOG=FILE keeps the gateway's whole log (level warn).
// Exit 0 when no acknowledged message was lost, 1 otherwise, 2 when it could not run.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AckPolicy, DeliverPolicy, jetstreamManager } from "@nats-io/jetstream";
import { connect as natsConnect } from "@nats-io/transport-node";
import mqttPacket from "mqtt-packet";
import rhea from "rhea";
import { attach, censusDiff, heapCensus } from "./lib/inspector.mjs";
import { freePort, natsServerBinary, rssKiB } from "./lib/procs.mjs";

const root = join(import.meta.dirname, "..");
const HOST = "127.0.0.1";

function option(flag, env, fallback) {
  const i = process.argv.indexOf(`--${flag}`);
  const raw = i >= 0 ? process.argv[i + 1] : process.env[env];
  return raw === undefined || raw === "" ? fallback : raw;
}
const CLIENTS = Math.max(1, Number(option("clients", "SOAK_CLIENTS", 100)));
const MINUTES = Math.max(0.25, Number(option("minutes", "SOAK_MINUTES", 2)));
const RATE = Math.max(0.1, Number(option("rate", "SOAK_RATE", 12)));
const DISCONNECTS = Math.max(0, Number(option("disconnects", "SOAK_DISCONNECTS", 10)));
const RESTART_AT = Math.min(0.9, Math.max(0, Number(option("nats-restart-at", "SOAK_NATS_RESTART_AT", 0.4))));
const OUT = option("out", "SOAK_OUT", join(root, "bench/results/soak-latest.json"));
const GC_EVERY_S = Math.max(0, Number(option("gc-every", "SOAK_GC_EVERY", 60)));
const FLAT_PCT = Number(option("flat-pct", "SOAK_FLAT_PCT", 10));
const CENSUS = process.argv.includes("--census") || process.env.SOAK_CENSUS === "1";
const DURATION_MS = MINUTES * 60_000;
/** After the run: how long acknowledged messages may take to reach their readers. */
const DRAIN_MS = 90_000;
/** Every bound together: the script ends by itself, whatever happens. */
const HARD_DEADLINE_MS = DURATION_MS + DRAIN_MS + 5 * 60_000;
/** MQTT clients that also read (each its own topic group), and AMQP operator queues. */
const MQTT_READERS = Math.max(1, Math.ceil(CLIENTS / 10));
const QUEUES = Math.max(1, Math.ceil(CLIENTS / 20));
const WINDOW = 10;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms).unref());
const rand = (n) => Math.floor(Math.random() * n);
const log = (...a) => console.error(`[soak ${((Date.now() - t0) / 1000).toFixed(0).padStart(4)}s]`, ...a);
const t0 = Date.now();

// -- accounting --------------------------------------------------------------------------

const stats = {
  sent: 0,
  acked: new Set(),
  refused: 0,
  /** Sent, then the connection went before an answer: maybe stored, never acknowledged. */
  unanswered: 0,
  received: new Map(),
  connects: { mqtt: 0, amqp: 0 },
  connectFailures: { mqtt: 0, amqp: 0 },
  /** Why connections failed before they were up (CONNACK code, AMQP condition). */
  failureReasons: {},
  disconnects: { mqtt: 0, amqp: 0 },
};
function failed(protocol, reason) {
  stats.connectFailures[protocol]++;
  // By reason and by the 10-second window of the run they fell in.
  const key = `${protocol}: ${reason} @${Math.floor((Date.now() - t0) / 10_000) * 10}s`;
  stats.failureReasons[key] = (stats.failureReasons[key] ?? 0) + 1;
}
/** MQTT topic groups whose reader has subscribed: a message to a group before that would have no reader. */
const readyGroups = [];
function receivedId(id) {
  stats.received.set(id, (stats.received.get(id) ?? 0) + 1);
}

// -- processes -------------------------------------------------------------------------

const work = mkdtempSync(join(tmpdir(), "mqgw-soak-"));
let nats;
let gateway;

async function startNats(port) {
  const conf = join(work, "nats.conf");
  writeFileSync(
    conf,
    [
      `server_name: soak`,
      `listen: ${HOST}:${port}`,
      `max_payload: 1MB`,
      `jetstream { store_dir: "${join(work, "js")}" }`,
    ].join("\n"),
  );
  const proc = spawn(natsServerBinary(), ["-c", conf], { stdio: ["ignore", "ignore", "pipe"] });
  await new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`nats-server did not start: ${seen.slice(-2000)}`)), 30_000);
    proc.stderr.setEncoding("utf8").on("data", (c) => {
      seen += c;
      if (seen.includes("Server is ready")) {
        clearTimeout(timer);
        resolve();
      }
    });
    proc.once("exit", (code) => reject(new Error(`nats-server exited with ${code}: ${seen.slice(-2000)}`)));
  });
  return { proc, port, url: `nats://${HOST}:${port}` };
}

function stop(proc, signal = "SIGTERM") {
  return new Promise((resolve) => {
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return resolve();
    const t = setTimeout(() => proc.kill("SIGKILL"), 15_000);
    proc.once("exit", () => {
      clearTimeout(t);
      resolve();
    });
    proc.kill(signal);
  });
}

async function startGateway(natsUrl) {
  const [mqtt, amqp, http] = [await freePort(), await freePort(), await freePort()];
  const config = {
    id: "soak",
    mqtt: { listen: `${HOST}:${mqtt}` },
    amqp: { listen: `${HOST}:${amqp}` },
    http: { listen: `${HOST}:${http}` },
    log: { level: "warn", format: "json" },
    bindings: [{ stream: "SOAK" }],
  };
  const file = join(work, "gateway.json");
  writeFileSync(file, JSON.stringify(config));
  const inspectPort = GC_EVERY_S > 0 || CENSUS ? await freePort() : undefined;
  const proc = spawn(
    process.execPath,
    [
      ...(inspectPort ? [`--inspect=${HOST}:${inspectPort}`] : []),
      join(root, "bin/mq-gateway.js"),
      "run",
      "--config",
      file,
      "--nats",
      natsUrl,
      "--data",
      join(work, "gw-data"),
    ],
    {
      stdio: ["ignore", "ignore", "pipe"],
      cwd: work,
      env: { ...process.env },
    },
  );
  let stderr = "";
  const gwLog = process.env.SOAK_GW_LOG
    ? (await import("node:fs")).createWriteStream(process.env.SOAK_GW_LOG)
    : undefined;
  proc.stderr.setEncoding("utf8").on("data", (c) => {
    stderr = (stderr + c).slice(-50_000);
    gwLog?.write(c);
  });
  const until = Date.now() + 30_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`gateway exited with ${proc.exitCode}: ${stderr.slice(-3000)}`);
    const ok = await fetch(`http://${HOST}:${http}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > until) throw new Error(`gateway did not come up: ${stderr.slice(-3000)}`);
    await sleep(200);
  }
  return {
    proc,
    ports: { mqtt, amqp, http },
    stderr: () => stderr,
    inspector: inspectPort ? await attach(inspectPort) : undefined,
  };
}

async function metrics() {
  const text = await fetch(`http://${HOST}:${gateway.ports.http}/metrics`).then(
    (r) => r.text(),
    () => "",
  );
  const pick = (name) =>
    Object.fromEntries(
      text
        .split("\n")
        .filter((l) => l.startsWith(`${name}{`))
        .map((l) => [l.slice(name.length, l.lastIndexOf(" ")), Number(l.split(" ").pop())]),
    );
  return {
    dropped: pick("mqgw_dropped_total"),
    refused: pick("mqgw_refused_total"),
    connections: pick("mqgw_connections"),
  };
}

// -- MQTT clients (raw sockets, mqtt-packet) -----------------------------------------------

class MqttClient {
  constructor(index) {
    this.index = index;
    this.version = index % 2 ? 4 : 5;
    this.clientId = `soak-m${index}`;
    this.reader = index % 10 === 0 ? `soak/s/${index / 10}` : undefined;
    this.up = false;
    this.stopped = false;
    this.seq = 0;
    this.nextPacketId = 1;
    /** packet id -> message id of publishes not yet answered. */
    this.pending = new Map();
  }

  connect() {
    if (this.stopped) return;
    const socket = net.connect(gateway.ports.mqtt, HOST);
    const parser = mqttPacket.parser({ protocolVersion: this.version });
    this.socket = socket;
    socket.setNoDelay(true);
    socket.on("connect", () => {
      this.send({
        cmd: "connect",
        protocolId: "MQTT",
        protocolVersion: this.version,
        clientId: this.clientId,
        clean: false,
        keepalive: 60,
        ...(this.version === 5 ? { properties: { sessionExpiryInterval: 900 } } : {}),
      });
    });
    socket.on("data", (d) => parser.parse(d));
    parser.on("packet", (p) => this.onPacket(p));
    parser.on("error", () => socket.destroy());
    socket.on("error", () => {});
    socket.on("close", () => this.closed(socket));
  }

  send(p) {
    if (!this.socket?.destroyed) this.socket.write(mqttPacket.generate(p, { protocolVersion: this.version }));
  }

  onPacket(p) {
    switch (p.cmd) {
      case "connack": {
        const code = this.version === 5 ? p.reasonCode : p.returnCode;
        if (code) {
          failed("mqtt", `CONNACK 0x${code.toString(16)}`);
          this.socket.destroy();
          return;
        }
        this.up = true;
        stats.connects.mqtt++;
        // A resumed session keeps its subscription (and what it still owes us).
        if (this.reader && !p.sessionPresent)
          this.send({ cmd: "subscribe", messageId: 65535, subscriptions: [{ topic: this.reader, qos: 1 }] });
        else this.readerReady();
        return;
      }
      case "suback":
        if (p.messageId === 65535 && (p.granted?.[0] ?? 0x80) < 0x80) this.readerReady();
        return;
      case "puback": {
        const id = this.pending.get(p.messageId);
        if (id === undefined) return;
        this.pending.delete(p.messageId);
        if ((p.reasonCode ?? 0) === 0) stats.acked.add(id);
        else stats.refused++;
        return;
      }
      case "publish":
        receivedId(p.payload.toString());
        if (p.qos === 1) this.send({ cmd: "puback", messageId: p.messageId });
        return;
      default:
        return;
    }
  }

  readerReady() {
    if (!this.reader || this.ready) return;
    this.ready = true;
    readyGroups.push(this.index / 10);
  }

  publish() {
    if (!this.up || this.pending.size >= WINDOW || readyGroups.length === 0) return;
    const id = `m${this.index}-${++this.seq}`;
    let packetId = this.nextPacketId;
    while (this.pending.has(packetId) || packetId === 65535) packetId = packetId >= 65534 ? 1 : packetId + 1;
    this.nextPacketId = packetId >= 65534 ? 1 : packetId + 1;
    this.pending.set(packetId, id);
    stats.sent++;
    const topic = `soak/s/${readyGroups[rand(readyGroups.length)]}`;
    this.send({
      cmd: "publish",
      topic,
      payload: Buffer.from(id),
      qos: 1,
      messageId: packetId,
      retain: false,
      dup: false,
    });
  }

  drop() {
    if (!this.up) return;
    stats.disconnects.mqtt++;
    // Half abrupt (as a lost network), half a clean DISCONNECT.
    if (Math.random() < 0.5) this.socket.destroy();
    else {
      this.send({ cmd: "disconnect" });
      this.socket.end();
    }
  }

  closed(socket) {
    if (socket !== this.socket) return;
    if (!this.up && !this.stopped) failed("mqtt", "closed before CONNACK");
    this.up = false;
    stats.unanswered += this.pending.size;
    this.pending.clear();
    if (!this.stopped) setTimeout(() => this.connect(), 200 + rand(1800)).unref();
  }

  stop() {
    this.stopped = true;
    this.socket?.destroy();
  }
}

// -- AMQP clients (rhea) -------------------------------------------------------------------

class AmqpClient {
  constructor(index) {
    this.index = index;
    this.queue = index % QUEUES;
    this.up = false;
    this.stopped = false;
    this.seq = 0;
    this.pending = new Map();
  }

  connect() {
    if (this.stopped) return;
    const container = rhea.create_container({ id: `soak-a${this.index}` });
    const conn = container.connect({ host: HOST, port: gateway.ports.amqp, reconnect: false, idle_time_out: 60_000 });
    this.conn = conn;
    conn.on("error", () => {});
    conn.on("connection_open", () => {
      this.up = true;
      stats.connects.amqp++;
      this.sender = conn.open_sender({ target: { address: `soak.a.${this.queue}` } });
      this.sender.on("accepted", (c) => this.settled(c.delivery, true));
      this.sender.on("rejected", (c) => this.settled(c.delivery, false));
      this.sender.on("released", (c) => this.settled(c.delivery, false));
      this.sender.on("modified", (c) => this.settled(c.delivery, false));
      this.sender.on("sender_error", () => {});
      const receiver = conn.open_receiver({
        source: { address: `soak.a.${this.queue}::q${this.queue}` },
        credit_window: 10,
        autoaccept: false,
      });
      receiver.on("message", (c) => {
        receivedId(bodyText(c.message.body));
        c.delivery.accept();
      });
      receiver.on("receiver_error", () => {});
    });
    conn.on("connection_error", () => {});
    // A clean close ends with connection_close, a lost one with disconnected: either way, once.
    conn.on("connection_close", () => this.gone(conn));
    conn.on("disconnected", () => this.gone(conn));
  }

  gone(conn) {
    if (conn !== this.conn) return;
    this.conn = undefined;
    if (!this.up && !this.stopped) failed("amqp", conn.error?.condition ?? "closed before open");
    this.up = false;
    stats.unanswered += this.pending.size;
    this.pending.clear();
    conn.socket?.destroy();
    if (!this.stopped) setTimeout(() => this.connect(), 200 + rand(1800)).unref();
  }

  settled(delivery, ok) {
    const id = this.pending.get(delivery);
    if (id === undefined) return;
    this.pending.delete(delivery);
    if (ok) stats.acked.add(id);
    else stats.refused++;
  }

  publish() {
    if (!this.up || !this.conn?.is_open() || !this.sender?.sendable() || this.pending.size >= WINDOW) return;
    const id = `a${this.index}-${++this.seq}`;
    stats.sent++;
    this.pending.set(this.sender.send({ body: rhea.message.data_section(Buffer.from(id)), message_id: id }), id);
  }

  drop() {
    if (!this.up) return;
    stats.disconnects.amqp++;
    const conn = this.conn;
    if (Math.random() < 0.5 && conn.socket) {
      // As a lost network: rhea does not report a socket it did not see fail, so the client notes it itself.
      conn.socket.destroy();
      this.gone(conn);
    } else conn.close();
  }

  stop() {
    this.stopped = true;
    try {
      this.conn?.socket?.destroy();
    } catch {}
  }
}

function bodyText(b) {
  if (typeof b === "string") return b;
  if (Buffer.isBuffer(b)) return b.toString();
  if (Buffer.isBuffer(b?.content)) return b.content.toString();
  return String(b);
}

// -- the run -------------------------------------------------------------------------------

async function main() {
  const deadline = setTimeout(() => {
    console.error("soak: hard deadline reached, giving up");
    void cleanup().then(() => process.exit(2));
  }, HARD_DEADLINE_MS);
  deadline.unref();

  log(
    `${CLIENTS} MQTT + ${CLIENTS} AMQP clients, ${MINUTES} min, ${RATE} msg/min each, ${DISCONNECTS}%/min dropped, NATS restart at ${RESTART_AT ? `${RESTART_AT * 100}%` : "never"}`,
  );
  nats = await startNats(await freePort());
  const nc = await natsConnect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: "SOAK", subjects: ["soak.s.>", "soak.a.>"] });
  for (let q = 0; q < QUEUES; q++) {
    await jsm.consumers.add("SOAK", {
      durable_name: `q${q}`,
      ack_policy: AckPolicy.Explicit,
      filter_subject: `soak.a.${q}`,
      ack_wait: 30_000_000_000,
    });
  }
  gateway = await startGateway(nats.url);
  log(`nats-server pid ${nats.proc.pid}, gateway pid ${gateway.proc.pid}`);

  const mqtt = Array.from({ length: CLIENTS }, (_, i) => new MqttClient(i));
  const amqp = Array.from({ length: CLIENTS }, (_, i) => new AmqpClient(i));
  // Connect in batches: a flood of 4,000 handshakes at once is a test of its own.
  for (let i = 0; i < CLIENTS; i += 100) {
    for (const c of [...mqtt.slice(i, i + 100), ...amqp.slice(i, i + 100)]) c.connect();
    await sleep(100);
  }
  for (
    let i = 0;
    i < 600 &&
    (mqtt.filter((c) => c.up).length + amqp.filter((c) => c.up).length < 2 * CLIENTS * 0.95 ||
      readyGroups.length < MQTT_READERS);
    i++
  )
    await sleep(100);
  log(
    `connected: ${mqtt.filter((c) => c.up).length} MQTT, ${amqp.filter((c) => c.up).length} AMQP; ${readyGroups.length}/${MQTT_READERS} readers subscribed`,
  );

  const rss = [];
  const sample = async () => {
    const m = await metrics();
    rss.push({
      t: Math.round((Date.now() - t0) / 1000),
      rss_mib: Math.round(rssKiB(gateway.proc.pid) / 1024),
      nats_rss_mib: nats.proc.exitCode === null ? Math.round(rssKiB(nats.proc.pid) / 1024) : null,
      mqtt_up: mqtt.filter((c) => c.up).length,
      amqp_up: amqp.filter((c) => c.up).length,
      sent: stats.sent,
      acked: stats.acked.size,
      received: stats.received.size,
      dropped: Object.values(m.dropped).reduce((a, b) => a + b, 0),
    });
    const s = rss.at(-1);
    log(`rss ${s.rss_mib} MiB, up ${s.mqtt_up}+${s.amqp_up}, sent ${s.sent}, acked ${s.acked}, received ${s.received}`);
  };

  // Heap after a full GC, through the inspector (bench/lib/inspector.mjs).
  const heap = [];
  const MiB = (b) => Math.round((b / 1024 / 1024) * 10) / 10;
  const heapSample = async (phase) => {
    const insp = gateway.inspector;
    if (!insp) return;
    try {
      await insp.send("HeapProfiler.collectGarbage");
      const { usedSize, totalSize } = await insp.send("Runtime.getHeapUsage");
      const { result } = await insp.send("Runtime.evaluate", {
        expression: "JSON.stringify(process.memoryUsage())",
        returnByValue: true,
      });
      const mu = JSON.parse(result.value);
      heap.push({
        t: Math.round((Date.now() - t0) / 1000),
        run_s: Math.round((Date.now() - started) / 1000),
        phase,
        heap_used_mib: MiB(usedSize),
        heap_total_mib: MiB(totalSize),
        external_mib: MiB(mu.external),
        array_buffers_mib: MiB(mu.arrayBuffers),
        rss_mib: MiB(mu.rss),
      });
      const h = heap.at(-1);
      log(`heap after GC ${h.heap_used_mib} MiB (external ${h.external_mib}, rss ${h.rss_mib})`);
    } catch (e) {
      log(`heap sample failed: ${e.message}`);
    }
  };
  const census = {};
  const takeCensus = async (label) => {
    if (!CENSUS || !gateway.inspector) return;
    try {
      const t = Date.now();
      census[label] = await heapCensus(gateway.inspector);
      log(`heap census "${label}" in ${((Date.now() - t) / 1000).toFixed(1)} s`);
    } catch (e) {
      log(`heap census failed: ${e.message}`);
    }
  };

  const started = Date.now();
  const tickMs = 100;
  const perTick = (RATE / 60) * (tickMs / 1000);
  const dropPerTick = (DISCONNECTS / 100 / 60) * (tickMs / 1000);
  let restarted = !RESTART_AT;
  let nextSample = 0;
  let nextHeap = 0;
  const censusAt = Math.min(3 * 60_000, DURATION_MS / 2);
  let censused = false;
  const all = [...mqtt, ...amqp];
  while (Date.now() - started < DURATION_MS) {
    for (const c of all) {
      if (Math.random() < perTick) c.publish();
      if (Math.random() < dropPerTick) c.drop();
    }
    if (!restarted && Date.now() - started >= DURATION_MS * RESTART_AT) {
      restarted = true;
      log("restarting nats-server (same port and store)");
      const port = nats.port;
      await stop(nats.proc);
      await sleep(500);
      nats = await startNats(port);
      log("nats-server back");
    }
    if (Date.now() >= nextSample) {
      nextSample = Date.now() + 10_000;
      await sample();
    }
    if (GC_EVERY_S > 0 && Date.now() >= nextHeap) {
      nextHeap = Date.now() + GC_EVERY_S * 1000;
      await heapSample("run");
    }
    if (!censused && Date.now() - started >= censusAt) {
      censused = true;
      await takeCensus("early");
    }
    await sleep(tickMs);
  }
  // The last sample of the run, before the drain (which has no publishing).
  if (GC_EVERY_S > 0) await heapSample("run");
  await takeCensus("end");

  log("publishing stopped; waiting for answers and deliveries");
  const answered = Date.now() + 20_000;
  while (Date.now() < answered && all.some((c) => c.pending.size > 0)) await sleep(200);
  const undelivered = () => [...stats.acked].filter((id) => !stats.received.has(id)).length;
  const drainUntil = Date.now() + DRAIN_MS;
  let last = -1;
  let still = 0;
  while (Date.now() < drainUntil) {
    const left = undelivered();
    if (left === 0) break;
    // Stop early once nothing has arrived for 40 s (longer than ack_wait's 30 s redelivery).
    still = left === last ? still + 1 : 0;
    last = left;
    if (still >= 40) break;
    await sleep(1000);
  }
  await sample();
  const finalMetrics = await metrics();

  // Ground truth: what the stream holds.
  log("reading the stream");
  const inStream = new Set();
  const js = (await import("@nats-io/jetstream")).jetstream(nc);
  const info = await jsm.streams.info("SOAK");
  const reader = await js.consumers.get("SOAK", { deliver_policy: DeliverPolicy.All });
  if (info.state.messages > 0) {
    const msgs = await reader.consume({ max_messages: 5_000 });
    for await (const m of msgs) {
      inStream.add(m.string());
      if (m.info.pending === 0 || inStream.size >= info.state.messages) break;
    }
  }
  const lost = [...stats.acked].filter((id) => !inStream.has(id));
  let duplicates = 0;
  for (const n of stats.received.values()) duplicates += n - 1;

  // The first minute is warm-up (connections, consumers, JIT); short runs use every sample.
  const warm = rss.filter((s) => s.t >= (rss[0]?.t ?? 0) + 60);
  const window = warm.length >= 5 ? warm : rss;
  const fifth = Math.max(1, Math.floor(window.length / 5));
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
  // Memory verdict over the run's second half (after the warm-up and the NATS restart).
  const half = DURATION_MS / 2000;
  const lateHeap = heap.filter((h) => h.phase === "run" && h.run_s >= half);
  const lateRss = rss.filter(
    (s) =>
      s.t - Math.round((started - t0) / 1000) >= half &&
      s.t - Math.round((started - t0) / 1000) <= DURATION_MS / 1000 + 1,
  );
  /** Least-squares slope, per minute, of y over t (seconds). */
  const slopePerMin = (pts) => {
    if (pts.length < 2) return null;
    const n = pts.length;
    const mt = pts.reduce((a, p) => a + p[0], 0) / n;
    const my = pts.reduce((a, p) => a + p[1], 0) / n;
    const num = pts.reduce((a, p) => a + (p[0] - mt) * (p[1] - my), 0);
    const den = pts.reduce((a, p) => a + (p[0] - mt) ** 2, 0);
    return den === 0 ? null : Math.round((num / den) * 60 * 10) / 10;
  };
  let memory;
  if (lateHeap.length >= 2) {
    const first = lateHeap[0].heap_used_mib;
    const lastH = lateHeap.at(-1).heap_used_mib;
    const growth = Math.round(((lastH - first) / first) * 1000) / 10;
    memory = {
      flat: growth < FLAT_PCT,
      heap_after_gc_second_half_mib: { first, last: lastH, growth_pct: growth, samples: lateHeap.length },
      heap_after_gc_slope_mib_per_min: slopePerMin(lateHeap.map((h) => [h.run_s, h.heap_used_mib])),
      threshold_pct: FLAT_PCT,
    };
  } else {
    memory = { flat: null, reason: `fewer than 2 heap samples in the second half (gc-every ${GC_EVERY_S} s)` };
  }
  memory.rss_second_half_slope_mib_per_min = slopePerMin(lateRss.map((s) => [s.t, s.rss_mib]));
  // A heap snapshot makes the gateway's RSS jump by about the heap's size (serialisation).
  if (CENSUS) memory.rss_note = "RSS distorted by --census (heap snapshots)";
  const report = {
    clients_per_protocol: CLIENTS,
    minutes: MINUTES,
    rate_per_client_per_min: RATE,
    disconnects_per_min_pct: DISCONNECTS,
    nats_restart_at: RESTART_AT,
    sent: stats.sent,
    acknowledged: stats.acked.size,
    refused: stats.refused,
    unanswered_at_disconnect: stats.unanswered,
    /** Sent on a connection that stayed up and never answered: must be 0 (a hang otherwise). */
    unanswered_at_end: {
      mqtt: mqtt.reduce((n, c) => n + c.pending.size, 0),
      amqp: amqp.reduce((n, c) => n + c.pending.size, 0),
    },
    received_unique: stats.received.size,
    duplicates,
    acknowledged_not_received: undelivered(),
    acknowledged_not_received_by_protocol: {
      mqtt: [...stats.acked].filter((id) => id.startsWith("m") && !stats.received.has(id)).length,
      amqp: [...stats.acked].filter((id) => id.startsWith("a") && !stats.received.has(id)).length,
    },
    acknowledged_not_received_examples: [...stats.acked].filter((id) => !stats.received.has(id)).slice(0, 20),
    lost_acknowledged: lost.length,
    lost_examples: lost.slice(0, 20),
    stream_messages: inStream.size,
    connects: stats.connects,
    connect_failures: stats.connectFailures,
    connect_failure_reasons: stats.failureReasons,
    disconnects: stats.disconnects,
    gateway_rss_mib: {
      min: Math.min(...rss.map((s) => s.rss_mib)),
      max: Math.max(...rss.map((s) => s.rss_mib)),
      early_median: median(window.slice(0, fifth).map((s) => s.rss_mib)),
      late_median: median(window.slice(-fifth).map((s) => s.rss_mib)),
    },
    dropped: finalMetrics.dropped,
    refused_by_reason: finalMetrics.refused,
    memory,
    heap_after_gc: heap,
    ...(census.early && census.end
      ? { heap_census_growth: censusDiff(census.early, census.end, 2 * CLIENTS, 40).split("\n") }
      : {}),
    samples: rss,
  };
  mkdirSync(join(OUT, ".."), { recursive: true });
  writeFileSync(OUT, `${JSON.stringify(report, null, 2)}\n`);
  const { samples, lost_examples, acknowledged_not_received_examples, heap_after_gc, heap_census_growth, ...summary } =
    report;
  console.log(JSON.stringify(summary, null, 2));
  console.log("t(s)  gateway RSS MiB  MQTT up  AMQP up  acked");
  for (const s of samples)
    console.log(
      `${String(s.t).padStart(4)}  ${String(s.rss_mib).padStart(15)}  ${String(s.mqtt_up).padStart(7)}  ${String(s.amqp_up).padStart(7)}  ${s.acked}`,
    );
  if (heap_after_gc.length) {
    console.log("run(s)  heap after GC MiB  external MiB  RSS MiB");
    for (const h of heap_after_gc)
      console.log(
        `${String(h.run_s).padStart(6)}  ${String(h.heap_used_mib).padStart(17)}  ${String(h.external_mib).padStart(12)}  ${String(h.rss_mib).padStart(7)}`,
      );
  }
  if (heap_census_growth) console.log(heap_census_growth.join("\n"));
  if (lost.length) console.log("LOST acknowledged, e.g.:", lost_examples.join(" "));
  const hh = memory.heap_after_gc_second_half_mib;
  console.log(
    memory.flat === null
      ? `MEMORY: no verdict (${memory.reason}); RSS second-half slope ${memory.rss_second_half_slope_mib_per_min} MiB/min`
      : `MEMORY ${memory.flat ? "FLAT" : "NOT FLAT"}: heap after GC ${hh.first} -> ${hh.last} MiB (${hh.growth_pct >= 0 ? "+" : ""}${hh.growth_pct} %, threshold ${FLAT_PCT} %) over the second half, ${hh.samples} samples; heap slope ${memory.heap_after_gc_slope_mib_per_min} MiB/min; RSS second-half slope ${memory.rss_second_half_slope_mib_per_min} MiB/min${CENSUS ? " (distorted by --census)" : ""}`,
  );
  log(`report written to ${OUT}`);

  for (const c of all) c.stop();
  gateway.inspector?.close();
  await nc.close().catch(() => {});
  await cleanup();
  clearTimeout(deadline);
  return lost.length === 0 ? 0 : 1;
}

async function cleanup() {
  await stop(gateway?.proc);
  await stop(nats?.proc);
}

main().then(
  (code) => process.exit(code),
  async (e) => {
    console.error("soak failed:", e?.stack ?? e);
    if (gateway) console.error(gateway.stderr().slice(-3000));
    await cleanup();
    process.exit(2);
  },
);
