// Issue 14, item 4: the limits clients are told, on the embedded default. The embedded
// nats-server takes 8 MiB messages; MQTT's CONNACK and AMQP's attach tell what NATS takes
// less room for the gateway's headers; 1 MiB messages cross MQTT and AMQP on the defaults.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqttPacket from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HEADER_ROOM } from "../../src/protocol/natsLimits.js";
import { AmqpClient, collect, detached, rhea, send } from "../amqp/rheaClient.js";
import { type GatewayHandle, startEmbeddedGateway, subscribed } from "../helpers/gateway.js";
import { connectMqtt } from "../helpers/mqttClient.js";
import { nextMsg } from "../helpers/natsMessages.js";
import { runPython } from "../helpers/python.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const run = promisify(execFile);
const proton = (script: string, args: string[]) =>
  runPython(join(import.meta.dirname, "../amqp/clients", script), args);
const MiB = 1024 * 1024;

let n = 0;
const unique = (prefix: string) => `${prefix}${process.pid}x${++n}`;
/** The bytes send.py --size writes. */
const protonBody = (size: number) => Buffer.from(Array.from({ length: size }, (_, i) => i % 251));
const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

describe("limits on the defaults (embedded nats-server)", () => {
  let gw: GatewayHandle & { natsUrl: string };
  let nc: NatsConnection;

  beforeAll(async () => {
    gw = await startEmbeddedGateway();
    nc = await connect({ servers: gw.natsUrl });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
  });

  it("the embedded nats-server takes 8 MiB; the CONNACK says 1 MiB (mqtt.max_packet_size, under the cap); AMQP links say 8 MiB less the header room", async () => {
    expect(nc.info?.max_payload).toBe(8 * MiB);
    const c = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    expect(c.connack.properties?.maximumPacketSize).toBe(MiB);
    await c.endAsync();
    const a = await AmqpClient.open(gw.port("amqp"));
    const sender = await a.sender(unique("lim.adv"));
    expect((sender as unknown as { max_message_size: number }).max_message_size).toBe(8 * MiB - HEADER_ROOM);
    await a.close();
  });

  it("MQTT: the largest packet the CONNACK allows (1 MiB) goes mosquitto_pub -> NATS -> mosquitto_sub, byte for byte", async () => {
    const topic = unique("lim/mqtt");
    // QoS 1 PUBLISH, MQTT 5: 1 + 3 (remaining length) + 2 + topic + 2 (packet id) + 1 (no properties) + payload.
    const payload = Buffer.from(Array.from({ length: MiB - (9 + topic.length) }, (_, i) => (i * 7) % 256));
    const file = join(mkdtempSync(join(tmpdir(), "mqgw-big-")), "payload.bin");
    writeFileSync(file, payload);
    const onNats = nextMsg(nc, topic.replaceAll("/", "."), 20_000);
    const sub = run(
      "mosquitto_sub",
      [
        "-p",
        String(gw.port("mqtt")),
        "-V",
        "mqttv5",
        "-i",
        "limits-sub",
        "-q",
        "1",
        "-t",
        topic,
        "-C",
        "1",
        "-W",
        "20",
        "-N",
      ],
      {
        encoding: "buffer",
        maxBuffer: 4 * MiB,
      },
    );
    // mosquitto_sub says nothing once subscribed: the gateway's /clients does.
    await subscribed(gw, "limits-sub");
    await run("mosquitto_pub", ["-p", String(gw.port("mqtt")), "-V", "mqttv5", "-q", "1", "-t", topic, "-f", file]);
    expect(sha256((await onNats).data)).toBe(sha256(payload));
    const { stdout } = await sub;
    expect(stdout.length).toBe(payload.length);
    expect(sha256(stdout)).toBe(sha256(payload));
  });

  it("AMQP: a 1 MiB message from a Qpid Proton sender reaches NATS and a rhea receiver", async () => {
    const address = unique("lim.amqp.in");
    const a = await AmqpClient.open(gw.port("amqp"));
    const got = collect(await a.receiver(address));
    const onNats = nextMsg(nc, address, 20_000);
    const s = proton("send.py", [`amqp://127.0.0.1:${gw.port("amqp")}`, address, "--size", String(MiB)]);
    expect(await s.upTo(1, 30_000)).toEqual([{ outcome: "accepted" }]);
    const body = protonBody(MiB);
    expect(sha256((await onNats).data)).toBe(sha256(body));
    const { message } = await got.next(15_000);
    expect(sha256((message.body as { content: Buffer }).content)).toBe(sha256(body));
    await a.close();
  });

  it("AMQP: a 1 MiB message through rhea's anonymous relay reaches a Qpid Proton receiver", async () => {
    const address = unique("lim.amqp.out");
    const r = proton("receive.py", [`amqp://127.0.0.1:${gw.port("amqp")}`, address, "--count", "1", "--size-only"]);
    await r.line((l) => l.ready === true);
    const a = await AmqpClient.open(gw.port("amqp"));
    const relay = await a.sender({ target: {} });
    const body = Buffer.alloc(MiB, 0x5a);
    expect(await send(relay, { to: address, body: rhea.message.data_section(body) })).toMatchObject({
      state: "accepted",
    });
    expect(await r.line((l) => l.size !== undefined, 15_000)).toMatchObject({
      to: address,
      size: MiB,
      sha256: sha256(body),
    });
    await a.close();
  });

  it("AMQP: a transfer over max-message-size is detached amqp:link:message-size-exceeded; the connection goes on", async () => {
    const a = await AmqpClient.open(gw.port("amqp"));
    const sender = await a.sender(unique("lim.amqp.big"));
    const gone = detached(sender, "sender", 20_000);
    sender.send({ body: rhea.message.data_section(Buffer.alloc(8 * MiB)) });
    expect(await gone).toMatchObject({ condition: "amqp:link:message-size-exceeded" });
    const ok = await a.sender(unique("lim.amqp.small"));
    expect(await send(ok, { body: rhea.message.data_section(Buffer.from("after")) })).toMatchObject({
      state: "accepted",
    });
    await a.close();
  });
});

describe("limits capped by a smaller nats.embedded_max_payload", () => {
  let gw: GatewayHandle & { natsUrl: string };
  const maxPayload = 256 * 1024;
  const told = maxPayload - HEADER_ROOM;

  beforeAll(async () => {
    gw = await startEmbeddedGateway({ nats: { embedded_max_payload: "256KiB" } });
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it("the CONNACK's Maximum Packet Size and AMQP max-message-size follow NATS's max_payload, not mqtt.max_packet_size", async () => {
    const c = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    expect(c.connack.properties?.maximumPacketSize).toBe(told);
    await c.endAsync();
    const a = await AmqpClient.open(gw.port("amqp"));
    const sender = await a.sender(unique("cap.adv"));
    expect((sender as unknown as { max_message_size: number }).max_message_size).toBe(told);
    await a.close();
  });

  it("a packet over what the CONNACK said is DISCONNECT 0x95; one of exactly that size is taken", async () => {
    // mosquitto_pub and mqtt.js keep to the CONNACK's limit themselves: only a raw client sends more.
    const topic = "cap/t";
    const fits = told - (9 + topic.length);
    const c = await RawMqtt.connected(gw.port("mqtt"), 5);
    c.send({
      cmd: "publish",
      topic,
      payload: Buffer.alloc(fits),
      qos: 1,
      messageId: 1,
      retain: false,
      dup: false,
    } as mqttPacket.Packet);
    expect(((await c.next("puback")) as mqttPacket.IPubackPacket).reasonCode ?? 0).toBe(0);
    c.send({
      cmd: "publish",
      topic,
      payload: Buffer.alloc(fits + 1),
      qos: 1,
      messageId: 2,
      retain: false,
      dup: false,
    } as mqttPacket.Packet);
    expect(((await c.next("disconnect")) as mqttPacket.IDisconnectPacket).reasonCode).toBe(0x95);
    await c.waitClosed();
  });
});
