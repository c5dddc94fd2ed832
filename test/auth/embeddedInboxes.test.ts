// Issue 13, finding 1 on the embedded default (no auth, every client anonymous): the
// gateway's own JetStream, KV and retained work must not ride the anonymous clients'
// shared NATS connection, so `#` and `+/+` subscribers get none of its replies and no
// second copy of a stored delivery.
import { writeFileSync } from "node:fs";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { publishesOf } from "../helpers/inbound.js";
import { natsServerBinary } from "../helpers/natsServer.js";
import { freePort } from "../helpers/ports.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

describe("embedded default: the gateway's own replies never reach # or +/+", () => {
  let gw: GatewayHandle;
  let nc: NatsConnection;

  beforeAll(async () => {
    const natsPort = await freePort();
    const config = {
      mqtt: { listen: "127.0.0.1:0" },
      amqp: { listen: "127.0.0.1:0" },
      http: { listen: "127.0.0.1:0" },
      log: { level: "info", format: "json" },
      nats: { embedded_listen: `127.0.0.1:${natsPort}` },
    };
    gw = await startGateway({ config, env: { NATS_SERVER_BIN: natsServerBinary() } });
    nc = await connect({ servers: `nats://127.0.0.1:${natsPort}` });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "ORDERS", subjects: ["orders.>"] });
    // Bind the stream now that the embedded server holds it.
    writeFileSync(gw.file, stringify({ ...config, bindings: [{ stream: "ORDERS" }] }));
    gw.process.kill("SIGHUP");
    await gw.waitForLog((l) => l.msg === "config reloaded");
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
  });

  it("counts on # and +/+ are exactly the clients' messages", async () => {
    const port = gw.port("mqtt");
    const all = await RawMqtt.connected(port, 5, { clientId: "hash" });
    const allGot = publishesOf(all);
    const two = await RawMqtt.connected(port, 5, { clientId: "plus-plus" });
    const twoGot = publishesOf(two);
    for (const [c, topic] of [
      [all, "#"],
      [two, "+/+"],
    ] as const) {
      c.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic, qos: 0 }] } as mqtt.Packet);
      expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0]);
    }

    const pub = await RawMqtt.connected(port, 5, { clientId: "pub" });
    const qos1 = async (topic: string, payload: string, id: number, retain = false) => {
      pub.send({
        cmd: "publish",
        topic,
        payload: Buffer.from(payload),
        qos: 1,
        messageId: id,
        retain,
        dup: false,
      } as mqtt.Packet);
      expect(((await pub.next("puback")) as mqtt.IPubackPacket).reasonCode ?? 0).toBe(0);
    };
    await qos1("orders/r", "retained", 1, true);
    // A persistent QoS 1 subscriber: KV writes, a consumer, a retained read, stored deliveries.
    const reader = await RawMqtt.connected(port, 5, {
      clientId: "reader",
      clean: false,
      properties: { sessionExpiryInterval: 300 },
    });
    const readerGot = publishesOf(reader);
    reader.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "orders/#", qos: 1 }] } as mqtt.Packet);
    expect(((await reader.next("suback")) as mqtt.ISubackPacket).granted).toEqual([1]);
    await readerGot.waitFor("orders/r");
    for (let i = 0; i < 3; i++) await qos1("orders/1", `stored-${i}`, i + 2);
    await expect
      .poll(() => readerGot.payloads().filter((p) => p.startsWith("stored-")).length, { timeout: 10_000 })
      .toBe(3);
    reader.end();

    nc.publish("m.marker", "m");
    await allGot.waitFor("m/marker");
    await twoGot.waitFor("m/marker");
    const expected = ["m/marker", "orders/1", "orders/1", "orders/1", "orders/r"];
    expect(allGot.topics().sort()).toEqual(expected);
    expect(twoGot.topics().sort()).toEqual(expected);
    all.end();
    two.end();
    pub.end();
  });
});
