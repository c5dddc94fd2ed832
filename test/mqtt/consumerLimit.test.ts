// A stream's consumer limit (nats-server 2.15: 1,000 per stream unless the stream sets its
// own) met head-on: a persistent session whose consumer the limit refuses waits for it, says
// which limit and what lifts it, loses nothing, and is served once there is room; an AMQP
// link is refused amqp:resource-limit-exceeded with the same words. The gateway's own MQTT
// store sets a limit of its own. docs/decisions/consumer-limits.md.
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { connectCollecting, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";

const persistent = (clientId: string) => ({
  protocolVersion: 5 as const,
  clientId,
  clean: false,
  properties: { sessionExpiryInterval: 3600 },
});

describe("a stream's consumer limit", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "TIGHT", subjects: ["tight.>"], max_consumers: 2 });
    gw = await startGateway({ nats: nats.url, config: { bindings: [{ stream: "TIGHT" }] } });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("a SUBSCRIBE past the limit is refused quota exceeded, naming the limit; nothing was promised to it", async () => {
    const first = await connectMqtt(gw.port("mqtt"), persistent("fills-1"));
    await first.subscribeAsync(["tight/a", "tight/b"], { qos: 1 });
    const late = await connectMqtt(gw.port("mqtt"), persistent("late-1"));
    const refusal = await late.subscribeAsync("tight/c", { qos: 1 }).then(
      () => undefined,
      (e: { packet?: { granted: number[]; properties?: { reasonString?: string } } }) => e.packet,
    );
    expect(refusal?.granted).toEqual([0x97]);
    expect(refusal?.properties?.reasonString).toMatch(
      /tight\/c: stream TIGHT has reached its max_consumers.*raise the stream's max_consumers/,
    );
    await late.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
    await first.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
  });

  it("sessions that fill the limit resume and get what they missed: a resume needs no second consumer", async () => {
    const ids = ["full-1", "full-2"];
    for (const [i, id] of ids.entries()) {
      const c = await connectMqtt(gw.port("mqtt"), persistent(id));
      await c.subscribeAsync(`tight/r${i}`, { qos: 1 });
      c.stream.destroy();
    }
    await eventually(async () => {
      let n = 0;
      for await (const _ of jsm.consumers.list("TIGHT")) n++;
      return n === 2 ? true : undefined;
    });
    const publisher = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    for (const [i] of ids.entries()) await publisher.publishAsync(`tight/r${i}`, `missed-${i}`, { qos: 1 });
    await publisher.endAsync();
    for (const [i, id] of ids.entries()) {
      const back = await connectCollecting(gw.port("mqtt"), persistent(id));
      expect(back.client.connack.sessionPresent).toBe(true);
      expect((await back.inbox.count(1, 15_000)).map((m) => m.payload.toString())).toEqual([`missed-${i}`]);
      await back.client.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
    }
  });

  it("an AMQP link past the limit is refused amqp:resource-limit-exceeded, naming the limit", async () => {
    const holders = [
      await connectMqtt(gw.port("mqtt"), persistent("fills-2")),
      await connectMqtt(gw.port("mqtt"), persistent("fills-3")),
    ];
    await holders[0]!.subscribeAsync("tight/d", { qos: 1 });
    await holders[1]!.subscribeAsync("tight/e", { qos: 1 });
    await eventually(async () => {
      let n = 0;
      for await (const _ of jsm.consumers.list("TIGHT")) n++;
      return n === 2 ? true : undefined;
    });
    const c = await AmqpClient.open(gw.port("amqp"));
    const error = await c.refused("receiver", { source: { address: "tight.f" } });
    expect(error).toMatchObject({ condition: "amqp:resource-limit-exceeded" });
    expect(error.description).toMatch(/stream TIGHT has reached its max_consumers/);
    await c.close();
    for (const h of holders) await h.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
  });

  it("the gateway's own MQTT store sets a limit far above nats-server's default", async () => {
    const c = await connectMqtt(gw.port("mqtt"), persistent("store-user"));
    await c.subscribeAsync("plant/store/#", { qos: 1 });
    const info = await jsm.streams.info("MQGW_MSGS");
    expect(info.config.max_consumers).toBeGreaterThanOrEqual(100_000);
    await c.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
  });
});
