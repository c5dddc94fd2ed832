// Issue 22, item 10: clauses of MQTT the gateway answered otherwise, each on raw bytes
// (mosquitto 2.0.11 answers the same bytes as written here, checked beside it).
import { connect as tcpConnect } from "node:net";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import mqtt, { type Packet } from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startEmbeddedGateway } from "../helpers/gateway.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

let n = 0;
const unique = (prefix: string) => `${prefix}${process.pid}x${++n}`;
const hex = (s: string) => Buffer.from(s.replaceAll(" ", ""), "hex");
const reasonOf = async (c: RawMqtt) => ((await c.next("disconnect")) as mqtt.IDisconnectPacket).reasonCode;

describe("MQTT clauses on the wire", () => {
  let gw: GatewayHandle & { natsUrl: string };
  let nc: NatsConnection;
  let port: number;
  const RECEIVE_MAXIMUM = 10;

  beforeAll(async () => {
    gw = await startEmbeddedGateway({ mqtt: { listen: "127.0.0.1:0", receive_maximum: RECEIVE_MAXIMUM } });
    port = gw.port("mqtt");
    nc = await connect({ servers: gw.natsUrl });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
  });

  it("[MQTT-3.1.2-2] 3.1.1: a CONNECT of protocol level 6 gets CONNACK 0x01, then the close", async () => {
    const c = await RawMqtt.open(port, 4);
    // CONNECT "MQTT" level 6, clean session, keep alive 60, client id "a".
    c.sendBytes(hex("10 0d 0004 4d515454 06 02 003c 0001 61"));
    expect(((await c.next("connack")) as mqtt.IConnackPacket).returnCode).toBe(1);
    await c.waitClosed();
  });

  describe.each([4, 5] as const)("MQTT %s", (version) => {
    const emptySubscribe = version === 5 ? hex("82 03 0001 00") : hex("82 02 0001");
    const emptyUnsubscribe = version === 5 ? hex("a2 03 0001 00") : hex("a2 02 0001");
    it.each([
      ["SUBSCRIBE", emptySubscribe],
      ["UNSUBSCRIBE", emptyUnsubscribe],
    ])(
      "[MQTT-3.8.3-3, MQTT-3.10.3-2] %s with no topic filter closes the connection (MQTT 5: DISCONNECT 0x82)",
      async (_name, bytes) => {
        const c = await RawMqtt.connected(port, version);
        c.sendBytes(bytes as Buffer);
        if (version === 5) expect(await reasonOf(c)).toBe(0x82);
        await c.waitClosed();
        expect(c.packets.map((p) => p.cmd)).toEqual([]);
      },
    );
  });

  it.each([0, 1])(
    "MQTT 5 3.3.2.1: a QoS %s PUBLISH with an empty topic and no topic alias is DISCONNECT 0x82",
    async (qos) => {
      const c = await RawMqtt.connected(port, 5);
      // PUBLISH, topic length 0, (packet id 1), no properties, payload "x".
      c.sendBytes(qos === 0 ? hex("30 04 0000 00 78") : hex("32 06 0000 0001 00 78"));
      expect(await reasonOf(c)).toBe(0x82);
      await c.waitClosed();
    },
  );

  it("[MQTT-4.7.3-1] 3.1.1: a PUBLISH with an empty topic closes the connection", async () => {
    const c = await RawMqtt.connected(port, 4);
    c.sendBytes(hex("30 03 0000 78"));
    await c.waitClosed();
    expect(c.packets.map((p) => p.cmd)).toEqual([]);
  });

  it("Receive Maximum exceeded by a client still writing: every publish passed on is PUBACKed, then DISCONNECT 0x93 is read before the close, with no reset", async () => {
    const topic = unique("rm/burst/");
    const onNats: string[] = [];
    const sub = nc.subscribe(topic.replaceAll("/", "."), { callback: (_e, m) => onNats.push(m.string()) });
    await nc.flush();
    // Paho's test_flow_control2: a client that sends far past the Receive Maximum without
    // waiting, and goes on writing while the gateway answers.
    const socket = tcpConnect(port, "127.0.0.1");
    const parser = mqtt.parser({ protocolVersion: 5 });
    const got: Packet[] = [];
    parser.on("packet", (p: Packet) => got.push(p));
    const errors: string[] = [];
    socket.on("data", (d) => parser.parse(d));
    socket.on("error", (e: NodeJS.ErrnoException) => errors.push(e.code ?? e.message));
    let ended = false;
    socket.on("end", () => {
      ended = true;
    });
    const closed = new Promise((r) => socket.once("close", r));
    await new Promise((r) => socket.once("connect", r));
    const g = (p: Packet) => mqtt.generate(p, { protocolVersion: 5 });
    socket.write(
      g({
        cmd: "connect",
        protocolId: "MQTT",
        protocolVersion: 5,
        clientId: unique("burst-"),
        clean: true,
        keepalive: 60,
      } as Packet),
    );
    await eventually(() => got.some((p) => p.cmd === "connack") || undefined, 10_000, "CONNACK");
    const payload = Buffer.alloc(1000, 0x61);
    const burst = (from: number) =>
      Buffer.concat(
        Array.from({ length: 500 }, (_, i) =>
          g({
            cmd: "publish",
            topic,
            payload: Buffer.concat([Buffer.from(`${from + i}:`), payload]),
            qos: 1,
            messageId: ((from + i) % 65535) + 1,
            retain: false,
            dup: false,
          } as Packet),
        ),
      );
    // Writes on until the socket will take no more: 5,000 publishes of 1 KB.
    for (let k = 0; k < 10 && !socket.destroyed && !socket.writableEnded; k++) socket.write(burst(k * 500));
    await closed;
    const cmds = got.map((p) => p.cmd);
    expect(cmds.at(-1)).toBe("disconnect");
    expect((got.at(-1) as mqtt.IDisconnectPacket).reasonCode).toBe(0x93);
    // A close after a half-close and a drain, not a reset: the client read to the end.
    expect(ended).toBe(true);
    expect(errors).toEqual([]);
    // Every publish NATS got was PUBACKed before the DISCONNECT: none is sent twice after a reconnect.
    await nc.flush();
    const acked = got.filter((p) => p.cmd === "puback").map((p) => (p as mqtt.IPubackPacket).messageId);
    expect(acked.length).toBeGreaterThan(0);
    const passedOn = onNats.map((m) => Number(m.split(":")[0]) + 1);
    expect(passedOn.sort((a, b) => a - b)).toEqual([...acked].sort((a, b) => a - b));
    sub.unsubscribe();
  });
});
