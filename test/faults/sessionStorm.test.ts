// Issue 24 at CI's size: persistent sessions (MQTT 3.1.1 and 5, two QoS 1 filters each)
// reconnect all at once while nats-server stalls (SIGSTOP for longer than a JetStream
// request's timeout, at several moments of the storm). Every session comes back with
// session present 1, gets the message published while it was away, and the consumers left
// are exactly the sessions' (two each): nothing lost, nothing left behind.
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";
import { storeConsumers } from "../helpers/storeConsumers.js";

const N = 100;
/** Longer than nats.js's JetStream request timeout (5 s): requests in flight time out. */
const STALL_MS = 6_000;

describe("a reconnect storm of persistent sessions while nats-server stalls", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const devices: Array<RawMqtt | undefined> = [];
  /** What each device received, by payload. */
  const received = Array.from({ length: N }, () => new Map<string, number>());
  const presentZero: number[] = [];
  /** Connections the gateway ended (a DISCONNECT reason, or a close): the device comes back, as devices do. */
  const closedByGateway: string[] = [];
  let ending = false;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    gw = await startGateway({ nats: nats.url, config: { log: { level: "info", format: "json" } } });
  });
  afterAll(async () => {
    ending = true;
    nats?.process.kill("SIGCONT");
    for (const d of devices) d?.socket.destroy();
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  const version = (i: number): 4 | 5 => (i % 2 === 0 ? 5 : 4);

  /** A device that comes back as devices do: CONNECT, and again after a refusal or a close, until it is in. */
  async function resume(i: number, first = false): Promise<void> {
    for (;;) {
      const c = await RawMqtt.open(gw.port("mqtt"), version(i));
      c.socket.on("data", () => take(i, c));
      c.send({
        cmd: "connect",
        protocolId: "MQTT",
        protocolVersion: version(i),
        clientId: `storm-${i}`,
        clean: false,
        keepalive: 60,
        ...(version(i) === 5 ? { properties: { sessionExpiryInterval: 3600 } } : {}),
      } as mqtt.Packet);
      const ack = (await c.next("connack", 30_000).catch(() => undefined)) as mqtt.IConnackPacket | undefined;
      if (ack && !ack.returnCode && !ack.reasonCode) {
        if (!first && !ack.sessionPresent) presentZero.push(i);
        devices[i] = c;
        c.socket.once("close", () => {
          if (devices[i] !== c || ending) return;
          const reason = (c.packets.find((p) => p.cmd === "disconnect") as mqtt.IDisconnectPacket | undefined)
            ?.reasonCode;
          closedByGateway.push(`${i}:${reason ?? "closed"}`);
          void resume(i);
        });
        return;
      }
      // Refused (the gateway answers 0x88 only after waiting for its store) or no CONNACK
      // within 30 s: the device tries again at once.
      c.socket.destroy();
    }
  }

  /** Takes a device's PUBLISHes and acknowledges each. */
  function take(i: number, c: RawMqtt): void {
    for (
      let k = c.packets.findIndex((p) => p.cmd === "publish");
      k >= 0;
      k = c.packets.findIndex((p) => p.cmd === "publish")
    ) {
      const p = c.packets.splice(k, 1)[0] as mqtt.IPublishPacket;
      const payload = p.payload.toString();
      received[i]!.set(payload, (received[i]!.get(payload) ?? 0) + 1);
      if (p.qos === 1)
        c.send({
          cmd: "puback",
          messageId: p.messageId,
          ...(version(i) === 5 ? { reasonCode: 0 } : {}),
        } as mqtt.Packet);
    }
  }

  /** Every device drops its connection (no DISCONNECT), as when their network goes. */
  function allAway(): void {
    const gone = devices.splice(0);
    for (const d of gone) d?.socket.destroy();
  }

  async function allResume(stallAfterMs: number | undefined): Promise<void> {
    allAway();
    const back = Promise.all(Array.from({ length: N }, (_, i) => resume(i)));
    if (stallAfterMs !== undefined) {
      await new Promise((r) => setTimeout(r, stallAfterMs));
      nats.process.kill("SIGSTOP");
      await new Promise((r) => setTimeout(r, STALL_MS));
      nats.process.kill("SIGCONT");
    }
    await back;
  }

  it("every session comes back present, gets what it missed, and leaves no consumer behind", {
    timeout: 240_000,
  }, async () => {
    for (let i = 0; i < N; i += 20)
      await Promise.all(
        Array.from({ length: Math.min(20, N - i) }, async (_, k) => {
          await resume(i + k, true);
          devices[i + k]!.send({
            cmd: "subscribe",
            messageId: 1,
            subscriptions: [
              { topic: `dev/${i + k}/cmd`, qos: 1 },
              { topic: "fleet/all/#", qos: 1 },
            ],
          } as mqtt.Packet);
          await devices[i + k]!.next("suback", 30_000);
        }),
      );

    // The stall lands at another moment of each storm: with the first CONNECTs, amid the resumes, near their end.
    for (const stallAfterMs of [0, 150, 600]) await allResume(stallAfterMs);
    expect(presentZero).toEqual([]);

    // While every device is away: one message to all, one to each.
    allAway();
    const publisher = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await publisher.publishAsync("fleet/all/update", "to-all", { qos: 1 });
    for (let i = 0; i < N; i++) await publisher.publishAsync(`dev/${i}/cmd`, `to-${i}`, { qos: 1 });
    await publisher.endAsync();
    await allResume(300);
    expect(presentZero).toEqual([]);
    await eventually(
      () => (received.every((r, i) => r.has("to-all") && r.has(`to-${i}`)) ? true : undefined),
      60_000,
      "every device's messages",
    ).catch(async (e: Error) => {
      // The consumer of the first device short of its own message, as the server has it.
      const first = received.findIndex((r, i) => !r.has(`to-${i}`));
      let consumer = "";
      for await (const c of jsm.consumers.list("MQGW_MSGS"))
        if ((c.config.filter_subjects ?? [c.config.filter_subject]).some((f) => f?.includes(`dev.${first}.cmd`)))
          consumer = JSON.stringify({
            delivered: c.delivered,
            acked: c.ack_floor,
            pending: c.num_pending,
            unacked: c.num_ack_pending,
            waiting: c.num_waiting,
            pin: c.priority_groups,
          });
      const missing = received.flatMap((r, i) =>
        [r.has("to-all") ? [] : [`${i}:to-all`], r.has(`to-${i}`) ? [] : [`${i}:to-${i}`]].flat(),
      );
      const warned = [
        ...new Set(gw.logs.filter((l) => (l.level as number) >= 40).map((l) => `${l.msg} ${l.err ?? ""}`)),
      ];
      throw new Error(
        `${e.message}; missing ${missing.length}: ${missing.slice(0, 20).join(", ")}; device ${first}'s consumer: ${consumer}; closed by the gateway: ${closedByGateway.join(", ")}; the gateway warned: ${warned.join(" | ")}`,
      );
    });

    // Two consumers a session, no more: what a stalled create or delete left goes with the session's own work.
    await eventually(
      async () => ((await storeConsumers(jsm)).length === 2 * N ? true : undefined),
      30_000,
      `${2 * N} consumers`,
    ).catch(async (e: Error) => {
      throw new Error(`${e.message}: ${(await storeConsumers(jsm)).length}`);
    });
  });
});
