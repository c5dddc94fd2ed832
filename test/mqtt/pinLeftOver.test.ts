// A resume takes its session's consumer over (UNPIN, RESET, then its first pull:
// docs/decisions/consumer-takeover.md). nats-server pins the first pull without a pin id
// that it finds waiting when it has a message to deliver, before it looks whether anyone
// still listens on that pull's inbox; a pull that ended (its inbox unsubscribed after the
// server last looked) is pinned and dropped, and the pin stays with nobody. A pull of an
// earlier connection that is still heard (a `>` subscriber, an inbox draining) is pinned
// and given the message, which then waits for its ack wait. Either way, when that happens
// at the takeover, before the new reader's first pull is queued, the new reader waits out
// the pin's priority_timeout (30 s). Here raw NATS pulls without an id stand for those
// pulls, at the moment that makes the takeover pin them; the session resumes on another
// gateway (a resume where it left adopts its parked reader and takes nothing over:
// docs/decisions/session-parking.md) and must get its message at once all the same.
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, createInbox, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import type { MqttClient } from "mqtt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";

/** What CONSUMER.INFO says of a pinned_client consumer's group (the client's types lack it). */
interface PinState {
  num_waiting: number;
  num_pending: number;
  num_ack_pending: number;
  priority_groups?: Array<{ group: string; pinned_client_id?: string }>;
}

describe("a takeover whose pin goes to a pull that went", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let gw: GatewayHandle;
  /** Where the sessions resume: their first gateway lets its parked readers go. */
  let other: GatewayHandle;
  let pub: MqttClient;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "PINS", subjects: ["pins.>"] });
    gw = await startGateway({ nats: nats.url, config: { bindings: [{ stream: "PINS" }] } });
    other = await startGateway({ nats: nats.url, config: { bindings: [{ stream: "PINS" }] } });
    pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
  });
  afterAll(async () => {
    await pub?.endAsync();
    await nc?.close();
    await gw?.stop();
    await other?.stop();
    await nats?.stop();
  });

  const info = async (consumer: string) => (await jsm.consumers.info("PINS", consumer)) as unknown as PinState;
  const pinOf = (s: PinState) => s.priority_groups?.find((g) => g.group === "mqgw")?.pinned_client_id ?? "";

  /** A persistent session (MQTT 5, expiry 600) on `topic`, collecting what it receives. */
  async function session(clientId: string, topic: string, received: string[], on = gw) {
    const c = await connectMqtt(
      on.port("mqtt"),
      { protocolVersion: 5, clientId, clean: false, properties: { sessionExpiryInterval: 600 }, resubscribe: false },
      (client) => client.on("message", (t, payload) => received.push(`${t} ${payload}`)),
    );
    if (!c.connack.sessionPresent) await c.subscribeAsync(topic, { qos: 1 });
    return c;
  }

  /** A pull without a pin id in the gateway's group, waiting at the server once this resolves. */
  async function pullWithoutId(consumer: string, waiting: number): Promise<Subscription> {
    const inbox = createInbox();
    const sub = nc.subscribe(inbox);
    nc.publish(
      `$JS.API.CONSUMER.MSG.NEXT.PINS.${consumer}`,
      JSON.stringify({ batch: 1, expires: 25_000_000_000, group: "mqgw" }),
      { reply: inbox },
    );
    // INFO drops waiting pulls nobody hears; this one is heard, so it stays.
    await eventually(async () => ((await info(consumer)).num_waiting === waiting ? true : undefined));
    return sub;
  }

  /**
   * Leaves the consumer of a session that never received anything pinned by nobody, with
   * one message pending and a pull without an id waiting: the next delivery the takeover
   * sets off pins that pull. `heard`: its inbox still has a subscriber (it gets the message).
   */
  async function leavePinToAPullThatWent(clientId: string, topic: string, heard: boolean) {
    const received: string[] = [];
    const first = await session(clientId, topic, received);
    await first.endAsync();
    const [consumer] = (await jsm.consumers.list("PINS").next()).filter((c) =>
      (c.config.filter_subject ?? c.config.filter_subjects?.[0] ?? "").startsWith(`pins.${topic.split("/")[1]}`),
    );
    expect(consumer).toBeDefined();
    const name = consumer!.name;
    // Its parked readers ask for no more: their last pulls expire.
    await eventually(async () => ((await info(name)).num_waiting === 0 ? true : undefined), 20_000, "pulls expired");
    // A pull that ends unheard: the message published next pins it, and the pin stays.
    (await pullWithoutId(name, 1)).unsubscribe();
    await nc.flush();
    await pub.publishAsync(topic, "offline", { qos: 1 });
    await eventually(async () => {
      const s = await info(name);
      return pinOf(s) !== "" && s.num_pending === 1 ? true : undefined;
    });
    // A pull that waits behind that pin (no id) while the message is pending.
    const last = await pullWithoutId(name, 1);
    if (!heard) {
      // Ended after the server last looked at its waiting pulls: it stays queued, unheard.
      last.unsubscribe();
      await nc.flush();
    }
    return { received, name, last };
  }

  it.each([
    ["went (its inbox unheard)", false],
    ["is still heard, by something that never acknowledges", true],
  ])(
    "a resume gets its offline message at once when the takeover pins a pull without an id that %s",
    async (_what, heard) => {
      const clientId = `left-${heard ? "heard" : "unheard"}-${Date.now()}`;
      const topic = `pins/${heard ? "h" : "u"}${Date.now()}`;
      const { received, name, last } = await leavePinToAPullThatWent(clientId, topic, heard);
      const started = Date.now();
      const resumed = await session(clientId, topic, received, other);
      expect(resumed.connack.sessionPresent).toBe(true);
      await eventually(() => (received.length > 0 ? true : undefined), 20_000, "the offline message");
      const ms = Date.now() - started;
      expect(received).toEqual([`${topic} offline`]);
      // The pin's priority_timeout is 30 s; a resume should not wait for it.
      expect(ms).toBeLessThan(8_000);
      // Read by the resumed reader, and acknowledged: nothing waits at the server.
      await eventually(async () => {
        const s = await info(name);
        return s.num_pending === 0 && s.num_ack_pending === 0 ? true : undefined;
      });
      last.unsubscribe();
      await resumed.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
    },
    40_000,
  );
});
