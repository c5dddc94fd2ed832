// A session that left gateway 0 moments ago (its stored readers parked there) resumes on
// gateway 1, which asks gateway 0 for it first (src/actors/mqtt/sessionHolder.ts). Whatever
// gateway 0 is doing then (answering, stalled so that the ask goes unanswered, or gone), the
// resume is served and every acknowledged message arrives once, in order per topic.
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { MqttClient } from "mqtt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, metric, startGateway } from "../helpers/gateway.js";
import { connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";

/** What gateway 0 is doing when gateway 1 asks it. */
const STATES: Array<[string, (gw: GatewayHandle) => void]> = [
  ["answering", () => {}],
  // Its NATS connection stays open, its parked pulls waiting and heard: the ask's ping times out.
  ["stalled (SIGSTOP)", (gw) => gw.process.kill("SIGSTOP")],
  ["gone (SIGKILL)", (gw) => gw.process.kill("SIGKILL")],
];

describe("a resume on another gateway moments after the drop, whatever the gateway it left is doing", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let stable: GatewayHandle;
  const config = { bindings: [{ stream: "ASKED" }] };

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    await (await jetstreamManager(nc)).streams.add({ name: "ASKED", subjects: ["asked.>"] });
    stable = await startGateway({ nats: nats.url, config });
  });
  afterAll(async () => {
    await nc?.close();
    await stable?.stop();
    await nats?.stop();
  });

  async function subscriber(gw: GatewayHandle, clientId: string, received: string[]) {
    const c = await connectMqtt(
      gw.port("mqtt"),
      { protocolVersion: 5, clientId, clean: false, properties: { sessionExpiryInterval: 600 }, resubscribe: false },
      (client) => client.on("message", (topic, payload) => received.push(`${topic} ${payload}`)),
    );
    if (!c.connack.sessionPresent) await c.subscribeAsync(["asked/+", "free/+"], { qos: 1 });
    return c;
  }

  async function publishAll(pub: MqttClient, from: number, to: number, sent: string[]) {
    for (let i = from; i < to; i++) {
      const topic = i % 2 === 0 ? "asked/x" : "free/y";
      await pub.publishAsync(topic, String(i), { qos: 1 });
      sent.push(`${topic} ${i}`);
    }
  }

  it.each(STATES)(
    "gateway 0 %s: served with its session, every message once and in order",
    {
      timeout: 60_000,
    },
    async (state, act) => {
      const left = await startGateway({ nats: nats.url, config });
      const clientId = `asked-${state.split(" ")[0]}-${Date.now()}`;
      const received: string[] = [];
      const sent: string[] = [];
      const pub = await connectMqtt(stable.port("mqtt"), { protocolVersion: 5 });
      try {
        let sub = await subscriber(left, clientId, received);
        await publishAll(pub, 0, 4, sent);
        await eventually(() => (received.length === 4 ? true : undefined));
        sub.end(true);
        await eventually(async () => {
          const parked = await metric(left, "mqgw_actors", { machine: "storedDelivery", state: "active.read.parked" });
          return parked === 2 ? true : undefined;
        });
        // Published while parked there: the parked pulls may hold some.
        await publishAll(pub, 4, 8, sent);
        act(left);
        sub = await subscriber(stable, clientId, received);
        expect(sub.connack.sessionPresent).toBe(true);
        await publishAll(pub, 8, 12, sent);
        // A stalled gateway's parked pulls still wait, heard, for up to 10 s: the pin watch hands back what they take.
        await eventually(() => (received.length >= sent.length ? true : undefined), 30_000, "every message delivered");
        expect([...received].sort()).toEqual([...sent].sort());
        for (const topic of ["asked/x", "free/y"])
          expect(received.filter((r) => r.startsWith(`${topic} `))).toEqual(
            sent.filter((s) => s.startsWith(`${topic} `)),
          );
        await sub.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
      } finally {
        if (left.process.signalCode === null) left.process.kill("SIGCONT");
        await left.stop("SIGKILL");
        await pub.endAsync();
      }
    },
  );
});
