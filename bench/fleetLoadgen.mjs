// One part of the fleet's load (forked by bench/fleet.mjs), as devices send: every client
// its own connection and client id, one PUBLISH per write, paced at `ratePerClient`.
//   role "pub": `clients` publishers; a timer every few ms writes the messages now due,
//               one socket write each, to the next clients in turn; the send time
//               (CLOCK_MONOTONIC, shared by every process of the machine) is in the payload.
//   role "sub": the subscribers (a filter each); latency samples from the payload's time.
// The parent sends "start", then "mark" twice (the measured window) and "stop"; each mark
// is answered with this process's counters and CPU at that moment.
import { encode, publishLayout, RawMqtt } from "./lib/mqttWire.mjs";

const spec = JSON.parse(process.argv[2]);
const PAYLOAD = 128;
const TICK_MS = 5;
const MAX_UNACKED = 8; // a device waits for its PUBACKs rather than queueing without bound
const nowNs = () => Number(process.hrtime.bigint());

let sent = 0;
let skipped = 0;
let acked = 0;
let received = 0;
let measuring = false;
let lat = new Float64Array(spec.expectedSamples ?? 1);
let nLat = 0;

async function openAll(make, count, concurrency = 32) {
  const out = new Array(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      out[i] = await make(i).connect();
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return out;
}

async function publishers() {
  const payload = Buffer.alloc(PAYLOAD, 0x61);
  const clients = [];
  const conns = await openAll(
    (i) => {
      const c = spec.clients[i];
      const state = { unacked: 0, nextId: 1 };
      clients[i] = state;
      return new RawMqtt({
        host: "127.0.0.1",
        port: spec.port,
        localAddress: spec.localAddress,
        clientId: c.id,
        onPuback: (n) => {
          state.unacked -= n;
          acked += n;
        },
      });
    },
    spec.clients.length,
  );
  for (const [i, c] of spec.clients.entries()) {
    const packet = encode.publish(c.topic, payload, spec.qos, 1);
    Object.assign(clients[i], { conn: conns[i], packet, layout: publishLayout(packet) });
  }
  let timer;
  const start = () => {
    const t0 = performance.now();
    const perMs = (spec.ratePerClient * clients.length) / 1000;
    let due = 0;
    let rr = 0;
    timer = setInterval(() => {
      const target = Math.floor((performance.now() - t0) * perMs);
      let n = target - due;
      due = target;
      const ts = nowNs();
      while (n-- > 0) {
        const c = clients[rr];
        rr = rr + 1 === clients.length ? 0 : rr + 1;
        if ((spec.qos > 0 && c.unacked >= MAX_UNACKED) || c.conn.socket.writableLength > 64 * 1024) {
          skipped++;
          continue;
        }
        // A fresh buffer per write: the socket may still hold the previous one.
        const out = Buffer.from(c.packet);
        if (spec.qos > 0) {
          out.writeUInt16BE(c.nextId, c.layout.idAt);
          c.nextId = c.nextId === 65535 ? 1 : c.nextId + 1;
          c.unacked++;
        }
        out.writeDoubleLE(ts, c.layout.payloadAt);
        c.conn.write(out);
        sent++;
      }
    }, TICK_MS);
  };
  return { start, stop: () => clearInterval(timer), conns };
}

async function subscribers() {
  const onPublish = (buf, _s, _e, _q, payloadAt) => {
    received++;
    if (measuring) {
      if (nLat === lat.length) {
        const bigger = new Float64Array(lat.length * 2);
        bigger.set(lat);
        lat = bigger;
      }
      lat[nLat++] = (nowNs() - buf.readDoubleLE(payloadAt)) / 1e6;
    }
  };
  const conns = [];
  for (const s of spec.subs) {
    const c = await new RawMqtt({ host: "127.0.0.1", port: spec.port, clientId: s.id, onPublish }).connect();
    await c.subscribe(s.filter, spec.qos);
    conns.push(c);
  }
  return { start: () => {}, stop: () => {}, conns };
}

const counters = () => {
  const u = process.cpuUsage();
  return { sent, skipped, acked, received, cpuUs: u.user + u.system };
};

let marks = 0;
(spec.role === "pub" ? publishers() : subscribers()).then(
  (part) => {
    process.send({ ready: true });
    process.on("message", (m) => {
      if (m === "start") part.start();
      else if (m === "mark") {
        marks++;
        measuring = marks === 1;
        process.send({ mark: counters() });
      } else if (m === "stop") {
        part.stop();
        const s = Array.from(lat.subarray(0, nLat)).sort((x, y) => x - y);
        const q = (p) => (s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : null);
        for (const c of part.conns) c.socket.destroy();
        process.send({ done: { ...counters(), samples: s.length, p50Ms: q(0.5), p90Ms: q(0.9), p99Ms: q(0.99), maxMs: s.at(-1) ?? null } });
        setTimeout(() => process.exit(0), 50);
      }
    });
  },
  (e) => {
    process.send({ error: e.stack ?? String(e) });
    setTimeout(() => process.exit(1), 50);
  },
);
