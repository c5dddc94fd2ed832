// Issue 13, finding 4 (second half): when stored delivery cannot start for a filter (the
// gateway user may not make the consumer), the SUBACK says so for that filter and the log
// names the missing permission. Before, the SUBACK granted QoS 1, the log said "live
// delivery only", and the core subscription dropped every QoS 1/2 copy.
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const serverConfig = `
accounts {
  APP {
    jetstream: enabled
    users: [
      { user: mqg, password: mqg, permissions: {
          publish: { allow: [">"], deny: ["$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.*", "$JS.API.CONSUMER.CREATE.ORDERS.>"] }
          subscribe: ">"
          allow_responses: true
      } }
      { user: app, password: app }
    ]
  }
}
`;

describe("SUBACK when stored delivery cannot start", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;

  beforeAll(async () => {
    nats = await startNatsServer({ config: serverConfig });
    const nc = await connect({ servers: nats.url, user: "app", pass: "app" });
    await (await jetstreamManager(nc)).streams.add({ name: "ORDERS", subjects: ["orders.>"] });
    await nc.close();
    gw = await startGateway({
      nats: nats.url,
      config: {
        gateway_users: { APP: { user: "mqg", password: "mqg" } },
        routing: [{ username: "*", account: "APP" }],
        bindings: [{ stream: "ORDERS", account: "APP" }],
        log: { level: "info", format: "json" },
      },
    });
  });
  afterAll(async () => {
    await gw?.stop();
    await nats?.stop();
  });

  const app = { username: "app", password: Buffer.from("app") };

  it("v5: 0x87 for the stored filter with a reason string naming it; the other filters granted; the log names the permission", async () => {
    const c = await RawMqtt.connected(gw.port("mqtt"), 5, {
      ...app,
      clean: false,
      clientId: "p5",
      properties: { sessionExpiryInterval: 60 },
    });
    c.send({
      cmd: "subscribe",
      messageId: 1,
      subscriptions: [
        { topic: "orders/+", qos: 1 },
        { topic: "other/x", qos: 1 },
        { topic: "orders/eu", qos: 0 },
      ],
    } as mqtt.Packet);
    const suback = (await c.next("suback")) as mqtt.ISubackPacket;
    expect(suback.granted).toEqual([0x87, 1, 0]);
    expect(suback.properties?.reasonString).toMatch(/orders\/\+.*\$JS\.API\.CONSUMER\.DURABLE\.CREATE\.ORDERS/);
    const line = await gw.waitForLog((l) => typeof l.missing_permission === "object");
    expect(line).toMatchObject({
      filter: "orders/+",
      missing_permission: { subject: expect.stringMatching(/^\$JS\.API\.CONSUMER\.DURABLE\.CREATE\.ORDERS\./) },
    });
    c.end();
  });

  it("3.1.1: 0x80 for that filter", async () => {
    const c = await RawMqtt.connected(gw.port("mqtt"), 4, { ...app, clean: false, clientId: "p4" });
    c.send({
      cmd: "subscribe",
      messageId: 1,
      subscriptions: [
        { topic: "orders/+", qos: 1 },
        { topic: "other/x", qos: 1 },
      ],
    } as mqtt.Packet);
    expect(((await c.next("suback")) as mqtt.ISubackPacket).granted).toEqual([0x80, 1]);
    c.end();
  });
});
