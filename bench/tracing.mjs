// Gateway CPU per QoS 0 message with tracing off and on (docs/decisions/trace-context.md).
// One MQTT 5 publisher, one MQTT 5 subscriber and one NATS subscriber on one topic; each
// variant runs on a fresh gateway, alternating, and the gateway's CPU (utime + stime) is
// read from /proc around N messages after a warmup (and the 1.5 s their spans take to be
// sent). Spans go to an OTLP/HTTP sink here; past the SDK's queue (4096) they are dropped.
//
//   node bench/tracing.mjs [--messages 50000] [--rounds 2] [--variants 0,1,2,3] [--rate MSGS_PER_S]
//
// Unpaced (the default) the publisher sends as fast as the gateway reads, and most spans
// overflow the SDK's queue; `--rate` paces it so that every span is sent.
import { createServer } from "node:http";
import net from "node:net";
import { parseArgs } from "node:util";
import { connect } from "@nats-io/transport-node";
import mqtt from "mqtt-packet";
import { cpuMicros, startGateway, startNatsServer } from "./lib/procs.mjs";

const { values } = parseArgs({
  options: {
    messages: { type: "string", default: "50000" },
    rounds: { type: "string", default: "2" },
    // Indexes into VARIANTS: 0,1 run on a build without tracing too (an A/B against the commit before it).
    variants: { type: "string", default: "0,1,2,3" },
    rate: { type: "string" },
  },
});
const N = Number(values.messages);
const WARMUP = Math.min(5_000, N);
const V5 = { protocolVersion: 5 };
const topic = "bench/trace/telemetry";
const subject = "bench.trace.telemetry";
const payload = Buffer.alloc(64, 0x61);
const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

const ALL_VARIANTS = [
  { name: "off, plain publishes", config: {}, traced: false },
  { name: "off, publishes with traceparent", config: {}, traced: true },
  { name: "otlp, publishes with traceparent", config: { tracing: { otlp: "SINK" } }, traced: true },
  { name: "otlp + generate, plain publishes", config: { tracing: { otlp: "SINK", generate: true } }, traced: false },
];

const VARIANTS = values.variants.split(",").map((i) => ALL_VARIANTS[Number(i)]);

/** An OTLP/HTTP sink that counts spans' bytes and requests. */
async function sink() {
  const seen = { requests: 0, bytes: 0 };
  const server = createServer((req, res) => {
    req.on("data", (c) => (seen.bytes += c.length));
    req.on("end", () => {
      seen.requests++;
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${server.address().port}/v1/traces`, seen, close: () => server.close() };
}

/** A raw MQTT 5 client; `count` is the PUBLISHes it has received. */
function client(port, clientId, subscribeTo) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: "127.0.0.1", port });
    const parser = mqtt.parser(V5);
    const c = { socket: s, count: 0, waiting: undefined };
    s.setNoDelay(true);
    s.on("error", reject);
    s.on("data", (chunk) => parser.parse(chunk));
    parser.on("packet", (p) => {
      if (p.cmd === "connack") {
        if (!subscribeTo) return resolve(c);
        s.write(mqtt.generate({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: subscribeTo, qos: 0 }] }, V5));
      } else if (p.cmd === "suback") resolve(c);
      else if (p.cmd === "publish") {
        c.count++;
        if (c.waiting && c.count >= c.waiting.n) c.waiting.resolve();
      }
    });
    s.on("connect", () =>
      s.write(
        mqtt.generate(
          { cmd: "connect", protocolId: "MQTT", protocolVersion: 5, clientId, clean: true, keepalive: 60 },
          V5,
        ),
      ),
    );
  });
}

const until = (c, n) => (c.count >= n ? Promise.resolve() : new Promise((resolve) => (c.waiting = { n, resolve })));

async function send(pub, packet, n) {
  const batch = Buffer.concat(Array.from({ length: 100 }, () => packet));
  const started = performance.now();
  for (let i = 0; i < n; i += 100) {
    if (!pub.socket.write(batch)) await new Promise((r) => pub.socket.once("drain", r));
    if (values.rate) {
      const due = started + ((i + 100) * 1000) / Number(values.rate);
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
  }
}

async function run(variant, nats, otlp) {
  const config = JSON.parse(JSON.stringify(variant.config).replaceAll("SINK", otlp.url));
  const gw = await startGateway({ nats, config });
  try {
    const nc = await connect({ servers: nats.url });
    const natsSide = { count: 0, waiting: undefined };
    nc.subscribe(subject, {
      callback: () => {
        natsSide.count++;
        if (natsSide.waiting && natsSide.count >= natsSide.waiting.n) natsSide.waiting.resolve();
      },
    });
    await nc.flush();
    const sub = await client(gw.mqttPort, "bench-sub", topic);
    const pub = await client(gw.mqttPort, "bench-pub");
    const properties = variant.traced ? { userProperties: { traceparent: TRACEPARENT } } : undefined;
    const packet = mqtt.generate(
      { cmd: "publish", topic, payload, qos: 0, retain: false, dup: false, ...(properties ? { properties } : {}) },
      V5,
    );
    await send(pub, packet, WARMUP);
    await Promise.all([until(sub, WARMUP), until(natsSide, WARMUP)]);
    const spansBefore = otlp.seen.bytes;
    const cpu0 = cpuMicros(gw.pid);
    const t0 = performance.now();
    await send(pub, packet, N);
    await Promise.all([until(sub, WARMUP + N), until(natsSide, WARMUP + N)]);
    const ms = performance.now() - t0;
    // The batched spans leave within a second: their encoding and sending count too (every
    // variant waits the same, so the idle gateway's own ticks weigh alike).
    await new Promise((r) => setTimeout(r, 1_500));
    const cpu = cpuMicros(gw.pid) - cpu0;
    pub.socket.destroy();
    sub.socket.destroy();
    await nc.close();
    return { us_per_message: cpu / N, messages_per_s: (N * 1000) / ms, otlp_bytes: otlp.seen.bytes - spansBefore };
  } finally {
    await gw.stop();
  }
}

const nats = await startNatsServer({ name: "tracing" });
const otlp = await sink();
const results = new Map(VARIANTS.map((v) => [v.name, []]));
try {
  for (let round = 0; round < Number(values.rounds); round++)
    for (const v of VARIANTS) results.get(v.name).push(await run(v, nats, otlp));
} finally {
  otlp.close();
  await nats.stop();
}
const best = (xs, f) => Math.min(...xs.map(f));
const base = best(results.get(VARIANTS[0].name), (r) => r.us_per_message);
const pace = values.rate ? `${values.rate}/s` : "unpaced";
console.log(
  `| variant (QoS 0, 1 publisher -> 1 MQTT + 1 NATS subscriber, ${N} messages, ${pace}) | gateway CPU µs/message (best of ${values.rounds}) | vs off, plain | OTLP bytes/message |`,
);
console.log("| --- | --- | --- | --- |");
for (const v of VARIANTS) {
  const rs = results.get(v.name);
  const us = best(rs, (r) => r.us_per_message);
  const otlpPer = Math.max(...rs.map((r) => r.otlp_bytes)) / N;
  console.log(`| ${v.name} | ${us.toFixed(2)} | ${(us / base).toFixed(2)}x | ${otlpPer.toFixed(0)} |`);
}
