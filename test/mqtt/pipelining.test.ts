// Issue 22, item 3: a client may send packets right after its CONNECT, without waiting
// for the CONNACK (MQTT 3.1.1 and 5, section 3.1.4). They are held until the session is
// ready and then handled in order: CONNACK first, then SUBACK / PUBACK, as mosquitto
// answers. A refused CONNECT takes them with it. Raw bytes in one write, and Debian's
// paho-mqtt, which writes SUBSCRIBE and PUBLISH as they are called when no loop runs yet.
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import mqtt, { type Packet } from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, metric, startEmbeddedGateway } from "../helpers/gateway.js";
import { nextMsg } from "../helpers/natsMessages.js";
import { eventually } from "../helpers/poll.js";
import { runPython } from "../helpers/python.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

let n = 0;
const unique = (prefix: string) => `${prefix}${process.pid}x${++n}`;

const bytes = (version: 4 | 5, ...packets: Packet[]) =>
  Buffer.concat(packets.map((p) => mqtt.generate(p, { protocolVersion: version })));
const connectPacket = (version: 4 | 5, extra: Partial<mqtt.IConnectPacket> = {}): Packet =>
  ({
    cmd: "connect",
    protocolId: "MQTT",
    protocolVersion: version,
    clientId: unique("pipe-"),
    clean: true,
    keepalive: 60,
    ...extra,
  }) as Packet;
const subscribe = (topic: string): Packet =>
  ({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic, qos: 1 }] }) as Packet;
const publish = (topic: string, payload: string): Packet =>
  ({ cmd: "publish", topic, payload: Buffer.from(payload), qos: 1, messageId: 2, retain: false, dup: false }) as Packet;

/** The kinds of packet received so far, in order. */
const kinds = (c: RawMqtt) => c.packets.map((p) => p.cmd);

describe("pipelining: packets sent before the CONNACK", () => {
  let gw: GatewayHandle & { natsUrl: string };
  let nc: NatsConnection;
  let port: number;

  beforeAll(async () => {
    gw = await startEmbeddedGateway();
    port = gw.port("mqtt");
    nc = await connect({ servers: gw.natsUrl });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
  });

  describe.each([4, 5] as const)("MQTT %s, raw bytes in one write", (version) => {
    it("CONNECT + SUBSCRIBE: CONNACK, then SUBACK", async () => {
      const c = await RawMqtt.open(port, version);
      c.sendBytes(bytes(version, connectPacket(version), subscribe(unique("pipe/s/"))));
      const suback = (await c.next("suback")) as mqtt.ISubackPacket;
      expect(suback.granted).toEqual([1]);
      expect(kinds(c)).toEqual(["connack"]);
      c.end();
    });

    it("CONNECT + QoS 1 PUBLISH: CONNACK, then PUBACK, and NATS has the message", async () => {
      const topic = unique("pipe/p/");
      const got = nextMsg(nc, topic.replaceAll("/", "."));
      await nc.flush();
      const c = await RawMqtt.open(port, version);
      c.sendBytes(bytes(version, connectPacket(version), publish(topic, "early")));
      const puback = (await c.next("puback")) as mqtt.IPubackPacket;
      expect(puback.messageId).toBe(2);
      expect(kinds(c)).toEqual(["connack"]);
      expect(new TextDecoder().decode((await got).data)).toBe("early");
      c.end();
    });

    it("CONNECT + SUBSCRIBE + PUBLISH to itself: CONNACK, SUBACK before PUBACK, the message delivered", async () => {
      const topic = unique("pipe/sp/");
      const c = await RawMqtt.open(port, version);
      c.sendBytes(bytes(version, connectPacket(version), subscribe(topic), publish(topic, "to-self")));
      await c.next("puback");
      const acks = kinds(c).filter((k) => k !== "publish");
      expect(acks).toEqual(["connack", "suback"]);
      const delivered = (await c.next("publish")) as mqtt.IPublishPacket;
      expect(delivered.payload.toString()).toBe("to-self");
      c.end();
    });

    it("a persistent session's CONNECT + SUBSCRIBE + PUBLISH to itself: its own message delivered, every time", async () => {
      // Its subscription is a consumer on the MQTT store, made a round trip after the
      // SUBSCRIBE: the PUBLISH waits for it (subscribesInFlight.ts), as mosquitto reads in order.
      const persistent =
        version === 5 ? { clean: false, properties: { sessionExpiryInterval: 600 } } : { clean: false };
      for (let round = 0; round < 5; round++) {
        const topic = unique("pipe/kept/");
        const c = await RawMqtt.open(port, version);
        c.sendBytes(
          bytes(version, connectPacket(version, persistent), subscribe(topic), publish(topic, `kept-${round}`)),
        );
        const delivered = (await c.next("publish")) as mqtt.IPublishPacket;
        expect(delivered.payload.toString()).toBe(`kept-${round}`);
        await c.next("puback");
        expect(kinds(c).filter((k) => k !== "publish")).toEqual(["connack", "suback"]);
        c.end();
      }
    });

    it("CONNECT refused: the packets after it are dropped with it (no SUBACK, no PUBACK, nothing on NATS)", async () => {
      const topic = unique("pipe/refused/");
      const got = nextMsg(nc, topic.replaceAll("/", "."));
      await nc.flush();
      // 3.1.1: clean session 0 without a client id [MQTT-3.1.3-8] (spelled out: mqtt-packet will not write it);
      // 5: an authentication method the gateway does not offer.
      const refused =
        version === 4
          ? Buffer.from([0x10, 0x0c, 0x00, 0x04, 0x4d, 0x51, 0x54, 0x54, 0x04, 0x00, 0x00, 0x0a, 0x00, 0x00])
          : bytes(5, connectPacket(5, { properties: { authenticationMethod: "SCRAM-SHA-1" } }));
      const c = await RawMqtt.open(port, version);
      c.sendBytes(Buffer.concat([refused, bytes(version, subscribe(topic), publish(topic, "never"))]));
      const ack = (await c.next("connack")) as mqtt.IConnackPacket;
      expect(version === 4 ? ack.returnCode : ack.reasonCode).toBe(version === 4 ? 0x02 : 0x8c);
      await c.waitClosed();
      expect(kinds(c)).toEqual([]);
      // A publish after it on NATS comes first: the refused one never went.
      nc.publish(topic.replaceAll("/", "."), "after");
      expect(new TextDecoder().decode((await got).data)).toBe("after");
    });
  });

  it.each([
    ["5", []],
    ["3.1.1", ["--v311"]],
  ])(
    "Debian's paho-mqtt (MQTT %s) writes SUBSCRIBE and a QoS 1 PUBLISH before reading the CONNACK: all answered, the message comes back",
    async (_v, flags) => {
      const topic = unique("pipe/paho/");
      const c = runPython(join(import.meta.dirname, "clients", "paho_pipeline.py"), [
        String(port),
        topic,
        ...flags,
        "--seconds",
        "20",
      ]);
      try {
        expect(await c.line((l) => l.written_before_connack !== undefined)).toEqual({ written_before_connack: true });
        await eventually(
          () =>
            (c.lines.some((l) => l.puback !== undefined) && c.lines.some((l) => l.message !== undefined)) || undefined,
          20_000,
          "PUBACK and message",
        );
        const events = c.lines.filter((l) => l.done === undefined && l.written_before_connack === undefined);
        expect(events[0]).toEqual({ connack: 0 });
        expect(events).toContainEqual({ suback: [1] });
        expect(events).toContainEqual({ message: "pipelined", qos: 1 });
        expect(events.some((l) => l.disconnect !== undefined)).toBe(false);
      } finally {
        c.kill();
      }
    },
  );
});

describe("pipelining within limits.max_connect_buffer", () => {
  it("bytes held before the CONNACK count as a partial CONNECT's: past the limit the socket is closed and counted", async () => {
    const gw = await startEmbeddedGateway({ limits: { max_connect_buffer: "4KiB" } });
    try {
      const port = gw.port("mqtt");
      const c = await RawMqtt.open(port, 5);
      const big = {
        cmd: "publish",
        topic: "pipe/big",
        payload: Buffer.alloc(8 * 1024, 1),
        qos: 0,
        retain: false,
        dup: false,
      } as Packet;
      c.sendBytes(bytes(5, connectPacket(5), big));
      await c.waitClosed();
      expect(kinds(c).filter((k) => k !== "connack")).toEqual([]);
      await gw.waitForLog((l) => l.msg === "closing a socket before its CONNACK: limits.max_connect_buffer is full");
      expect(await metric(gw, "mqgw_refused_total", { protocol: "mqtt", reason: "connect_buffer_full" })).toBe(1);
      // Within the limit the same client is served.
      const ok = await RawMqtt.open(port, 5);
      ok.sendBytes(
        bytes(5, connectPacket(5), { ...big, payload: Buffer.alloc(1024, 1) } as Packet, { cmd: "pingreq" }),
      );
      await ok.next("pingresp");
      expect(kinds(ok)).toEqual(["connack"]);
      ok.end();
    } finally {
      await gw.stop();
    }
  });
});
