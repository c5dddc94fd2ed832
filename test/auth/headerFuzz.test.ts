// Issue 13, finding 3, as a fuzz test: arbitrary header maps from NATS to an MQTT 5
// subscriber (mqtt.js parsing the stream). A header value over 65,535 bytes used to
// become a PUBLISH whose length claimed more than it held, so the next message's payload
// parsed as a packet of the publisher's choosing. Every message must arrive once, in
// order, with its own payload, on the subscribed topic, and the stream must stay in sync.
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import fc from "fast-check";
import mqttPacket from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { metric } from "../faults/util.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";

const value = fc.oneof(
  fc.string({ unit: fc.constantFrom(..."abc XYZ-_/.%:é😀"), maxLength: 20 }),
  fc.constantFrom("%FF", "%C3", "%00", "a%00b", "%ED%A0%80", "100%", ""),
  fc.integer({ min: 65_000, max: 70_000 }).map((n) => "v".repeat(n)),
  fc.constant("é".repeat(33_000)),
);
const key = fc.oneof(
  fc.constantFrom(
    "Mqgw-Prop-x",
    "Mqgw-Prop-%FF",
    "Mqgw-Prop-a%00",
    "Mqgw-Content-Type",
    "Mqgw-Correlation-Id",
    "Mqgw-Reply-To",
    "Mqgw-QoS",
    "Mqgw-Mqtt-Props-Order",
    "Trace-Id",
  ),
  fc.stringMatching(/^[A-Za-z0-9-]{1,12}$/).map((k) => `Mqgw-Prop-${k}`),
  fc.constant(`Mqgw-Prop-${"k".repeat(66_000)}`),
);
const headerMaps = fc.array(fc.tuple(key, value), { minLength: 1, maxLength: 5 });

describe("header fuzz: NATS -> MQTT 5 (mqtt.js)", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer({ config: "max_payload: 8MB" });
    gw = await startGateway({
      nats: nats.url,
      config: { mqtt: { listen: "127.0.0.1:0", max_packet_size: "8MiB" }, log: { level: "info", format: "json" } },
    });
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("200 messages with arbitrary headers arrive once each, in order, with their payloads; nothing forged parses", async () => {
    const client = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, clientId: "fuzz" });
    const errors: Error[] = [];
    client.on("error", (e) => errors.push(e));
    let closed = false;
    client.on("close", () => (closed = true));
    const got = collect(client);
    await client.subscribeAsync("fz/#", { qos: 0 });

    const maps = fc.sample(headerMaps, { numRuns: 200, seed: 13 });
    // Each payload is a whole MQTT PUBLISH on another topic: what a desynchronised stream would read as a packet.
    const forged = (i: number) =>
      mqttPacket.generate(
        { cmd: "publish", topic: "forged/x", payload: Buffer.from(`forged ${i}`), qos: 0, retain: false, dup: false },
        { protocolVersion: 5 },
      );
    for (const [i, map] of maps.entries()) {
      const h = headers();
      for (const [k, v] of map) h.append(k, v);
      nc.publish(`fz.${i}`, forged(i), { headers: h });
    }
    nc.publish("fz.end", "end");
    await nc.flush();
    await got.count(maps.length + 1, 30_000);

    expect(errors).toEqual([]);
    expect(closed).toBe(false);
    expect(got.seen.map((s) => s.topic)).toEqual([...maps.map((_m, i) => `fz/${i}`), "fz/end"]);
    for (const [i, s] of got.seen.slice(0, -1).entries()) expect(s.payload.equals(forged(i))).toBe(true);
    expect(await metric(gw, "mqgw_properties_dropped_total", { protocol: "mqtt" })).toBeGreaterThan(0);
    await client.endAsync();
  });
});
