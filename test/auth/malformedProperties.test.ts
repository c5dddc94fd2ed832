// Issue 13, finding 6: a PUBLISH whose user-property key length runs past its property
// block was accepted and published (mqtt-packet reads the key on into the payload).
// MQTT 5 says Malformed Packet; Mosquitto, the reference, answers DISCONNECT 0x81 and
// closes. The gateway must do the same, and publish nothing.
import { type ChildProcess, spawn } from "node:child_process";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { freePort } from "../helpers/ports.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

/** The finding's packet: topic `t`, a property block of 5 bytes whose user property claims a 16-byte key. */
function malformed(): Buffer {
  const props = Buffer.from([0x26, 0x00, 0x10, 0x61, 0x62]);
  const body = Buffer.concat([
    Buffer.from([0, 1, 0x74]),
    Buffer.from([props.length]),
    props,
    Buffer.from("hello world payload here"),
  ]);
  return Buffer.concat([Buffer.from([0x30, body.length]), body]);
}

async function answer(port: number): Promise<{ reasonCode: number | undefined; closed: boolean }> {
  const c = await RawMqtt.connected(port, 5, { clientId: "malformed" });
  c.sendBytes(malformed());
  const d = (await c.next("disconnect")) as mqtt.IDisconnectPacket;
  await c.waitClosed();
  return { reasonCode: d.reasonCode, closed: c.closed };
}

describe("a user property running past its property block (MQTT 5: malformed)", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let mosquitto: ChildProcess;
  let mosquittoPort: number;

  beforeAll(async () => {
    nats = await startNatsServer();
    gw = await startGateway({ nats: nats.url, config: { log: { level: "info", format: "json" } } });
    nc = await connect({ servers: nats.url });
    mosquittoPort = await freePort();
    mosquitto = spawn("/usr/sbin/mosquitto", ["-p", String(mosquittoPort)], { stdio: ["ignore", "ignore", "pipe"] });
    await eventually(
      () =>
        RawMqtt.connected(mosquittoPort, 5).then((c) => {
          c.end();
          return true;
        }),
      10_000,
      "mosquitto up",
    );
  });
  afterAll(async () => {
    mosquitto?.kill();
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("the gateway answers as Mosquitto does (DISCONNECT 0x81, close) and publishes nothing", async () => {
    const seen: string[] = [];
    const sub = nc.subscribe("t", { callback: (_e, m) => seen.push(m.string()) });
    await nc.flush();
    const reference = await answer(mosquittoPort);
    expect(reference).toEqual({ reasonCode: 0x81, closed: true });
    expect(await answer(gw.port("mqtt"))).toEqual(reference);
    // A well-formed publish after it arrives; the malformed one never did.
    const ok = await RawMqtt.connected(gw.port("mqtt"), 5);
    ok.send({
      cmd: "publish",
      topic: "t",
      payload: Buffer.from("after"),
      qos: 1,
      messageId: 1,
      retain: false,
      dup: false,
      properties: { userProperties: { ab: "x" } },
    } as mqtt.Packet);
    await ok.next("puback");
    await eventually(() => (seen.includes("after") ? true : undefined), 5_000, "the good publish");
    expect(seen).toEqual(["after"]);
    sub.unsubscribe();
    ok.end();
  });
});
