import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import fc from "fast-check";
import type { MqttClient } from "mqtt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";

/** What happens next to the persistent subscriber, or how many messages the publisher sends. */
type Step =
  | { readonly kind: "publish"; readonly count: number; readonly gateway: 0 | 1 }
  | { readonly kind: "online"; readonly gateway: 0 | 1 }
  | { readonly kind: "offline" }
  | { readonly kind: "drop" };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    kind: fc.constant("publish" as const),
    count: fc.integer({ min: 1, max: 8 }),
    gateway: fc.constantFrom(0 as const, 1 as const),
  }),
  fc.record({ kind: fc.constant("online" as const), gateway: fc.constantFrom(0 as const, 1 as const) }),
  fc.constant({ kind: "offline" as const }),
  fc.constant({ kind: "drop" as const }),
);

/** Two topics a binding stores (the operator's stream), one it does not (the MQTT store). */
const TOPICS = ["plant/move/a", "plant/move/b", "free/move/c"];
/** The background publisher's topics, one of each kind: it sends while the steps run, moves included. */
const BACKGROUND = ["plant/move/bg", "free/move/bg"];

describe("a persistent QoS 1 subscriber moving between two gateways while a publisher keeps sending", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  const gws: GatewayHandle[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    await (await jetstreamManager(nc)).streams.add({ name: "PLANT", subjects: ["plant.>"] });
    const config = { bindings: [{ stream: "PLANT" }] };
    gws.push(await startGateway({ nats: nats.url, config }), await startGateway({ nats: nats.url, config }));
  });
  afterAll(async () => {
    await nc?.close();
    for (const g of gws) await g.stop();
    await nats?.stop();
  });

  it("gets every PUBACKed message, and on each topic in the order published, whatever the schedule (MQTT 4.6)", {
    timeout: 180_000,
  }, async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 3, maxLength: 10 }), async (steps) => {
        const clientId = `mover-${run++}`;
        const received: Array<{ topic: string; payload: string }> = [];
        const acked: string[] = [];
        let sub: MqttClient | undefined;
        const online = async (gateway: 0 | 1) => {
          // Connecting while still connected elsewhere takes the session over from there.
          const next = await connectMqtt(
            gws[gateway]!.port("mqtt"),
            {
              protocolVersion: 5,
              clientId,
              clean: false,
              properties: { sessionExpiryInterval: 600 },
              resubscribe: false,
            },
            (c) => c.on("message", (topic, payload) => received.push({ topic, payload: payload.toString() })),
          );
          if (!next.connack.sessionPresent) await next.subscribeAsync(["plant/move/+", "free/move/+"], { qos: 1 });
          sub?.end(true);
          sub = next;
        };
        const pubs = await Promise.all(gws.map((g) => connectMqtt(g.port("mqtt"), { protocolVersion: 5 })));
        let n = 0;
        /** Resolves on PUBACK: from then on the message must reach the subscriber. */
        const publish = async (gateway: 0 | 1, topic: string) => {
          const payload = `${n++}`;
          await pubs[gateway]!.publishAsync(topic, payload, { qos: 1 });
          acked.push(`${topic} ${payload}`);
        };
        let steady = true;
        let background: Promise<void> = Promise.resolve();
        try {
          await online(0);
          // From the first subscription on, one message at a time through either gateway in
          // turn, all through the schedule, moves included: its order per topic is defined,
          // as one publisher's is (MQTT 4.6).
          background = (async () => {
            for (let k = 0; steady; k++) await publish((k % 2) as 0 | 1, BACKGROUND[k % BACKGROUND.length]!);
          })();
          for (const s of steps) {
            if (s.kind === "online") await online(s.gateway);
            else if (s.kind === "offline") {
              await sub?.endAsync();
              sub = undefined;
            } else if (s.kind === "drop") {
              sub?.end(true);
              sub = undefined;
            } else {
              for (let i = 0; i < s.count; i++) await publish(s.gateway, TOPICS[(n + 1) % TOPICS.length]!);
            }
          }
          steady = false;
          await background;
          await online(1);
          await eventually(
            () => (acked.every((a) => received.some((r) => `${r.topic} ${r.payload}` === a)) ? true : undefined),
            15_000,
            "every acknowledged message delivered",
          );
          for (const topic of [...TOPICS, ...BACKGROUND]) {
            const firsts = [...new Set(received.filter((r) => r.topic === topic).map((r) => Number(r.payload)))];
            const published = acked.filter((a) => a.startsWith(`${topic} `)).map((a) => Number(a.split(" ")[1]));
            expect(firsts, topic).toEqual(published);
          }
        } finally {
          steady = false;
          await background.catch(() => {});
          await sub?.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
          await Promise.all(pubs.map((p) => p.endAsync()));
        }
      }),
      { numRuns: 12 },
    );
  });
});
