// One scenario against one side, in its own process (forked by bench/run.mjs).
// Pre-encoded packets over raw sockets; the window of messages in flight keeps the
// servers busy without letting queues grow, so what is measured is what they sustain.
// Reports msgs/s delivered, CPU of the server processes per delivered message (/proc),
// its own CPU, and latency samples when the publisher is paced.
import { performance } from "node:perf_hooks";
import { encode, publishLayout, RawMqtt, repeat } from "./lib/mqttWire.mjs";
import { encodePub, RawNats } from "./lib/natsWire.mjs";
import { cpuMicros, machineTicks } from "./lib/procs.mjs";
import { SCENARIOS } from "./lib/scenarios.mjs";

const PAYLOAD = 128;
const HOST = "127.0.0.1";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function run(spec) {
  const sc = { ...SCENARIOS[spec.scenario] };
  if (sc.rate !== undefined && spec.rate) sc.rate = spec.rate; // --rate: a paced run at another rate
  const tag = `${spec.side}-${spec.scenario}-${process.pid}`;
  const batch = spec.batch ?? 32;
  const qos1Inflight = spec.qos1Inflight ?? 128;
  const paced = sc.rate !== undefined;
  const window = (spec.window ?? 4000) * sc.fanout;

  // Latency samples (paced runs): send time is written into the payload's first 8 bytes.
  const lat = new Float64Array(paced ? sc.rate * ((spec.durationMs + spec.warmupMs) / 1000 + 5) : 0);
  let nLat = 0;
  // Publish -> PUBACK times (paced QoS 1), by packet id.
  const sentAt = new Float64Array(65536);
  const ackLat = new Float64Array(lat.length);
  let nAck = 0;
  let measuring = false;
  const onPublish = paced
    ? (buf, _s, _e, _q, payloadAt) => {
        if (measuring && nLat < lat.length) lat[nLat++] = performance.now() - buf.readDoubleLE(payloadAt);
      }
    : undefined;

  const subs = [];
  for (const [i, s] of sc.subs.entries()) {
    if (s.kind === "mqtt") {
      const c = await new RawMqtt({ host: HOST, port: spec.mqttPort, clientId: `${tag}-sub${i}`, clean: !s.persistent, onPublish }).connect();
      await c.subscribe(s.filter, s.qos);
      subs.push(c);
    } else {
      const c = await new RawNats({ host: HOST, port: spec.natsPort }).connect();
      await c.subscribe(s.filter, i + 1);
      subs.push(c);
    }
  }
  const delivered = () => {
    let n = 0;
    for (const s of subs) n += s.received;
    return n;
  };

  const payload = Buffer.alloc(PAYLOAD, 0x61);
  const pubs = [];
  for (const [i, p] of sc.pubs.entries()) {
    const pub = { unacked: 0, next: 0 };
    if (p.kind === "mqtt") {
      pub.conn = await new RawMqtt({ host: HOST, port: spec.mqttPort, clientId: `${tag}-pub${i}`, onPuback: (n, id) => {
        pub.unacked -= n;
        if (paced && measuring && nAck < ackLat.length) ackLat[nAck++] = performance.now() - sentAt[id];
        schedule();
      } }).connect();
      pub.qos = p.qos;
      pub.packet = encode.publish(p.topics[0], payload, p.qos, 1);
      pub.layout = publishLayout(pub.packet);
      pub.batch = repeat(pub.packet, batch);
    } else {
      pub.conn = await new RawNats({ host: HOST, port: spec.natsPort }).connect();
      pub.qos = 0;
      pub.packet = encodePub(p.topics[0], payload);
      pub.batch = Buffer.concat(Array.from({ length: batch }, (_, k) => encodePub(p.topics[k % p.topics.length], payload)));
    }
    pubs.push(pub);
  }

  let nextId = 1;
  const takeId = () => {
    const id = nextId;
    nextId = nextId === 65535 ? 1 : nextId + 1;
    return id;
  };
  /** A batch of `n` packets ready to write: QoS 0 reuses the pre-encoded bytes, QoS 1 gets fresh packet ids. */
  const batchOf = (pub, n) => {
    if (pub.qos === 0) return n === batch ? pub.batch : pub.batch.subarray(0, n * pub.packet.length);
    const out = Buffer.from(pub.batch.subarray(0, n * pub.packet.length));
    const { idAt, length } = pub.layout;
    for (let k = 0; k < n; k++) out.writeUInt16BE(takeId(), k * length + idAt);
    return out;
  };

  // -- closed loop (throughput) -----------------------------------------------------
  let sent = 0;
  let lost = 0;
  let stopped = false;
  let rr = 0;
  let scheduled = false;
  let lastDelivered = 0;
  let lastProgress = performance.now();
  function schedule() {
    if (scheduled || paced || stopped) return;
    scheduled = true;
    setImmediate(pump);
  }
  function pump() {
    scheduled = false;
    if (stopped) return;
    for (let guard = 0; guard < 64; guard++) {
      const inflight = sent * sc.fanout - delivered() - lost;
      if (inflight + batch * sc.fanout > window) return;
      let wrote = false;
      for (let k = 0; k < pubs.length; k++) {
        const pub = pubs[(rr + k) % pubs.length];
        if (pub.conn.socket.writableLength > 256 * 1024) continue;
        let n = batch;
        if (pub.qos > 0) n = Math.min(batch, qos1Inflight - pub.unacked);
        if (n <= 0) continue;
        rr = (rr + k + 1) % pubs.length;
        pub.unacked += pub.qos > 0 ? n : 0;
        sent += n;
        pub.conn.write(batchOf(pub, n));
        wrote = true;
        break;
      }
      if (!wrote) return;
    }
    schedule();
  }
  for (const s of subs) s.socket.on("data", schedule);
  for (const p of pubs) p.conn.socket.on("drain", schedule);

  // -- paced (latency) --------------------------------------------------------------
  let pacer;
  const startPaced = () => {
    const pub = pubs[0];
    const t0 = performance.now();
    pacer = setInterval(() => {
      const due = Math.floor(((performance.now() - t0) * sc.rate) / 1000) - sent;
      for (let k = 0; k < due; k++) {
        const out = Buffer.from(pub.packet);
        const now = performance.now();
        if (pub.qos > 0) {
          const id = takeId();
          out.writeUInt16BE(id, pub.layout.idAt);
          sentAt[id] = now;
        }
        out.writeDoubleLE(now, pub.layout.payloadAt);
        pub.conn.write(out);
        sent++;
      }
    }, 1);
  };

  const qos0Only = pubs.every((p) => p.qos === 0) && sc.subs.every((s) => !s.qos);
  const stall = setInterval(() => {
    const d = delivered();
    const now = performance.now();
    if (d !== lastDelivered) {
      lastDelivered = d;
      lastProgress = now;
    } else if (!paced && qos0Only && now - lastProgress > 300) {
      // QoS 0 messages the server dropped: stop waiting for them. (QoS 1 is never written off: a stall is a stall.)
      const inflight = sent * sc.fanout - d - lost;
      if (inflight > 0) lost += inflight;
      lastProgress = now;
      schedule();
    }
  }, 20);

  const snap = () => ({
    t: performance.now(),
    delivered: delivered(),
    sent,
    lost,
    serverCpu: spec.pids.map(cpuMicros),
    self: process.cpuUsage(),
    machine: machineTicks(),
  });

  if (paced) startPaced();
  else pump();
  await sleep(spec.warmupMs);
  const a = snap();
  measuring = true;
  await sleep(spec.durationMs);
  const b = snap();
  measuring = false;
  stopped = true;
  clearInterval(stall);
  if (pacer) clearInterval(pacer);

  const secs = (b.t - a.t) / 1000;
  const n = b.delivered - a.delivered;
  const serverCpu = spec.pids.map((_, i) => b.serverCpu[i] - a.serverCpu[i]);
  const selfCpu = b.self.user + b.self.system - a.self.user - a.self.system;
  const totalServer = serverCpu.reduce((x, y) => x + y, 0);
  const mt = { busy: b.machine.busy - a.machine.busy, total: b.machine.total - a.machine.total };
  const result = {
    side: spec.side,
    scenario: spec.scenario,
    seconds: secs,
    delivered: n,
    msgsPerSec: n / secs,
    published: b.sent - a.sent,
    lost: b.lost - a.lost,
    serverCpuUsPerMsg: n > 0 ? totalServer / n : null,
    serverCpuUsPerMsgByProcess: Object.fromEntries(spec.pidNames.map((name, i) => [name, n > 0 ? serverCpu[i] / n : null])),
    serverCores: totalServer / 1e6 / secs,
    loadgenCores: selfCpu / 1e6 / secs,
    loadgenShareOfCpu: selfCpu / (selfCpu + totalServer),
    machineBusy: mt.total > 0 ? mt.busy / mt.total : null,
  };
  if (paced) {
    const s = Array.from(lat.subarray(0, nLat)).sort((x, y) => x - y);
    const q = (p) => (s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : null);
    Object.assign(result, { samples: s.length, p50Ms: q(0.5), p90Ms: q(0.9), p99Ms: q(0.99), maxMs: s.at(-1) ?? null });
    if (nAck > 0) {
      const a = Array.from(ackLat.subarray(0, nAck)).sort((x, y) => x - y);
      Object.assign(result, { pubackP50Ms: a[Math.floor(0.5 * a.length)], pubackP99Ms: a[Math.min(a.length - 1, Math.floor(0.99 * a.length))] });
    }
  }
  for (const c of [...subs, ...pubs.map((p) => p.conn)]) c.close();
  return result;
}

const spec = JSON.parse(process.argv[2]);
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
