import { connect as tcpConnect } from "node:net";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import fc from "fast-check";
import mqttPacket from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

/** Sends bytes on a fresh connection; resolves once the gateway closed it, or after a bound (a partial packet waits for more). */
function poke(port: number, bytes: Uint8Array): Promise<"closed" | "answered" | "silent"> {
  return new Promise((resolve) => {
    const s = tcpConnect(port, "127.0.0.1", () => s.write(bytes));
    let answered = false;
    s.on("data", () => {
      answered = true;
    });
    s.on("error", () => {});
    s.on("close", () => resolve(answered ? "answered" : "closed"));
    // A partial packet is legitimately left waiting for more bytes: stop waiting after a bound.
    setTimeout(() => {
      s.destroy();
      resolve(answered ? "answered" : "silent");
    }, 150).unref();
  });
}

const validPackets = (): Buffer[] => [
  mqttPacket.generate(
    {
      cmd: "connect",
      protocolId: "MQTT",
      protocolVersion: 5,
      clientId: "fuzz",
      clean: true,
      keepalive: 10,
      properties: { sessionExpiryInterval: 0, userProperties: { a: "b" } },
    },
    { protocolVersion: 5 },
  ),
  mqttPacket.generate({
    cmd: "connect",
    protocolId: "MQTT",
    protocolVersion: 4,
    clientId: "fuzz4",
    clean: true,
    keepalive: 10,
  }),
  mqttPacket.generate({
    cmd: "publish",
    topic: "fuzz/t",
    payload: Buffer.from("x"),
    qos: 1,
    messageId: 3,
    retain: false,
    dup: false,
  }),
  mqttPacket.generate({ cmd: "subscribe", messageId: 4, subscriptions: [{ topic: "fuzz/#", qos: 1 }] }),
];

describe("hostile MQTT input", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let port: number;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer();
    gw = await startGateway({
      nats: nats.url,
      config: { mqtt: { listen: "127.0.0.1:0", max_packet_size: "64KiB" }, limits: { connect_timeout: "1s" } },
    });
    port = gw.port("mqtt");
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  /** A healthy client's publish still reaches NATS. */
  async function stillServing(): Promise<void> {
    const sub = nc.subscribe("canary.t", { max: 1 });
    await nc.flush();
    const c = await RawMqtt.connected(port, 4);
    c.send({
      cmd: "publish",
      topic: "canary/t",
      payload: Buffer.from("ok"),
      qos: 1,
      messageId: 1,
      retain: false,
      dup: false,
    });
    await c.next("puback");
    for await (const m of sub) expect(m.string()).toBe("ok");
    c.end();
  }

  it("random bytes and mutated packets: the gateway answers or closes, and keeps serving others", async () => {
    const canary = await RawMqtt.connected(port, 5);
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.uint8Array({ minLength: 1, maxLength: 200 }),
          fc
            .tuple(
              fc.constantFrom(...validPackets()),
              fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 6 }),
            )
            .map(([p, flips]) => {
              const b = Buffer.from(p);
              for (const [i, v] of flips) b[i % b.length] = v;
              return new Uint8Array(b);
            }),
        ),
        async (bytes) => {
          await poke(port, bytes);
          expect(gw.process.exitCode).toBeNull();
        },
      ),
      { numRuns: 60 },
    );
    canary.send({ cmd: "pingreq" });
    await canary.next("pingresp");
    canary.end();
    await stillServing();
    expect(gw.process.exitCode).toBeNull();
  });

  it("a slowloris CONNECT (bytes dribbled, never finished) is closed after connect_timeout", async () => {
    const connectBytes = validPackets()[0]!;
    const s = tcpConnect(port, "127.0.0.1");
    await new Promise((r) => s.once("connect", r));
    s.write(connectBytes.subarray(0, 5));
    const closedAt = await new Promise<number>((resolve) => s.once("close", () => resolve(Date.now())));
    expect(closedAt).toBeGreaterThan(0);
    await stillServing();
  });

  it("invalid UTF-8 in a topic closes that client only", async () => {
    const c = await RawMqtt.connected(port, 4);
    // PUBLISH QoS 0, topic length 2, topic bytes ff fe, payload "x".
    c.sendBytes(Buffer.from([0x30, 0x05, 0x00, 0x02, 0xff, 0xfe, 0x78]));
    await c.waitClosed();
    await stillServing();
  });

  it("wrong fixed-header flags close the connection", async () => {
    const c = await RawMqtt.connected(port, 4);
    // SUBSCRIBE must have flags 0010; send 0000.
    c.sendBytes(Buffer.from([0x80, 0x08, 0x00, 0x01, 0x00, 0x03, 0x61, 0x2f, 0x62, 0x00]));
    await c.waitClosed();
    await stillServing();
  });

  it("a flood of CONNECTs from many sockets leaves the gateway serving", async () => {
    const clients = await Promise.all(Array.from({ length: 100 }, (_, i) => RawMqtt.connected(port, i % 2 ? 4 : 5)));
    for (const c of clients) c.end();
    await stillServing();
  });
});
