// Bytes on the wire with and without server-to-client topic aliases (docs/decisions/topic-aliases.md).
// Two MQTT 5 subscribers on a fleet's long topics (one per vehicle), one allowing aliases
// (Topic Alias Maximum --alias-max), one not; a NATS client publishes N small messages,
// the vehicles in turn; each subscriber's socket bytes are counted from its SUBACK to its
// N-th PUBLISH.
//
//   node bench/topic-aliases.mjs [--messages 10000] [--payload 16] [--levels 6] [--vehicles 1] [--alias-max 16]
import net from "node:net";
import { parseArgs } from "node:util";
import { connect } from "@nats-io/transport-node";
import mqtt from "mqtt-packet";
import { startGateway, startNatsServer } from "./lib/procs.mjs";

const { values } = parseArgs({
  options: {
    messages: { type: "string", default: "10000" },
    payload: { type: "string", default: "16" },
    levels: { type: "string", default: "6" },
    vehicles: { type: "string", default: "1" },
    "alias-max": { type: "string", default: "16" },
  },
});
const N = Number(values.messages);
const payload = Buffer.alloc(Number(values.payload), 0x61);
const levels = [
  "fleet",
  "eu-west-1",
  "depot-0042",
  "vehicle-000123",
  "telemetry",
  "engine",
  "coolant",
  "temperature",
].slice(0, Number(values.levels));
const vehicles = Number(values.vehicles);
const aliasMax = Number(values["alias-max"]);
const topicOf = (v) =>
  levels.map((l) => (l === "vehicle-000123" && vehicles > 1 ? `vehicle-${String(v).padStart(6, "0")}` : l)).join("/");
const topic = topicOf(0);
// One vehicle: its topic; a fleet: the vehicle level is `+`.
const filter = vehicles > 1 ? levels.map((l) => (l === "vehicle-000123" ? "+" : l)).join("/") : topic;

/** A raw MQTT 5 subscriber counting bytes and PUBLISHes after its SUBACK. */
function subscriber(port, clientId, topicAliasMaximum) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: "127.0.0.1", port });
    const parser = mqtt.parser({ protocolVersion: 5 });
    const state = { bytes: 0, publishes: 0, aliased: 0, counting: false, done: undefined };
    s.on("error", reject);
    s.on("data", (chunk) => {
      if (state.counting) state.bytes += chunk.length;
      parser.parse(chunk);
    });
    parser.on("packet", (p) => {
      if (p.cmd === "connack") {
        s.write(
          mqtt.generate(
            { cmd: "subscribe", messageId: 1, subscriptions: [{ topic: filter, qos: 0 }] },
            { protocolVersion: 5 },
          ),
        );
      } else if (p.cmd === "suback") {
        state.counting = true;
        resolve({ state, finished: new Promise((r) => (state.done = r)), close: () => s.destroy() });
      } else if (p.cmd === "publish") {
        state.publishes++;
        if (p.topic === "") state.aliased++;
        if (state.publishes === N) state.done?.();
      }
    });
    s.on("connect", () => {
      const properties = topicAliasMaximum ? { topicAliasMaximum } : {};
      s.write(
        mqtt.generate(
          { cmd: "connect", protocolId: "MQTT", protocolVersion: 5, clientId, clean: true, keepalive: 60, properties },
          { protocolVersion: 5 },
        ),
      );
    });
  });
}

const nats = await startNatsServer({ name: "aliases" });
const gw = await startGateway({ nats });
try {
  const plain = await subscriber(gw.mqttPort, "plain", 0);
  const aliased = await subscriber(gw.mqttPort, "aliased", aliasMax);
  const nc = await connect({ servers: nats.url });
  const subjects = Array.from({ length: vehicles }, (_, v) => topicOf(v).replaceAll("/", "."));
  for (let i = 0; i < N; i++) {
    nc.publish(subjects[i % vehicles], payload);
    if (i % 1000 === 999) await nc.flush();
  }
  await nc.flush();
  await Promise.all([plain.finished, aliased.finished]);
  const per = (s) => s.bytes / N;
  const saved = 1 - aliased.state.bytes / plain.state.bytes;
  console.log(
    JSON.stringify(
      {
        topic,
        topic_bytes: Buffer.byteLength(topic),
        vehicles,
        topic_alias_maximum: aliasMax,
        payload_bytes: payload.length,
        messages: N,
        bytes_per_message: { without_aliases: per(plain.state), with_aliases: per(aliased.state) },
        aliased_publishes: aliased.state.aliased,
        saved_percent: Math.round(saved * 1000) / 10,
      },
      null,
      2,
    ),
  );
  plain.close();
  aliased.close();
  await nc.close();
} finally {
  await gw.stop();
  await nats.stop();
}
