// A clean stop (SIGTERM) saves every MQTT session before NATS closes: each record is left
// detached, expiring from the stop, as a disconnect leaves it; none stays marked connected
// by a gateway that is gone (which only the sweep or the next connect would settle).
import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqttPacket from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const SESSIONS = 300;

describe("a clean stop with many persistent sessions", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it("saves each session detached before it closes NATS", { timeout: 120_000 }, async () => {
    const gw = await startGateway({ nats: nats.url, config: { log: { level: "info", format: "json" } } });
    const clients: RawMqtt[] = [];
    for (let i = 0; i < SESSIONS; i++) {
      const c = await RawMqtt.connected(gw.port("mqtt"), i % 2 === 0 ? 5 : 4, {
        clientId: `stopper-${i}`,
        clean: false,
        ...(i % 2 === 0 ? { properties: { sessionExpiryInterval: 600 } } : {}),
      });
      c.send({
        cmd: "subscribe",
        messageId: 1,
        subscriptions: [{ topic: `plant/stop/${i}`, qos: 1 }],
      } as mqttPacket.Packet);
      await c.next("suback");
      clients.push(c);
    }
    expect(await gw.stop("SIGTERM")).toBe(0);
    for (const c of clients) c.socket.destroy();

    const kv = await new Kvm(nc).open("MQGW_SESSIONS");
    const marked: string[] = [];
    let records = 0;
    for await (const key of await kv.keys()) {
      const e = await kv.get(key);
      if (e?.operation !== "PUT" || e.value.byteLength === 0 || key.includes(".")) continue;
      records++;
      if ((e.json() as { connected?: boolean }).connected) marked.push(Buffer.from(key, "base64url").toString());
    }
    expect(records).toBe(SESSIONS);
    expect(marked).toEqual([]);
    expect(gw.logs.filter((l) => String(l.msg).startsWith("session store"))).toEqual([]);
  });
});
