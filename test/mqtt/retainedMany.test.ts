// Retained messages at fleet scale: a subscription matching more retained topics than one
// JetStream read may answer (nats-server's direct get answers 413 past 1,024), one
// SUBSCRIBE whose filters are read together, and reads that leave nothing behind in NATS.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectMqtt } from "../helpers/mqttClient.js";
import { natsSubscriptions } from "../helpers/natsMonitor.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { freePort } from "../helpers/ports.js";

const DEVICES = 1_100;

describe("retained messages of many topics", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let monitor: number;

  beforeAll(async () => {
    monitor = await freePort();
    nats = await startNatsServer({ config: `http: "127.0.0.1:${monitor}"` });
    gw = await startGateway({ nats: nats.url });
    const devices = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    // In rounds within the gateway's Receive Maximum (256), which mqtt.js does not keep to by itself.
    for (let from = 0; from < DEVICES; from += 200) {
      await Promise.all(
        Array.from({ length: Math.min(200, DEVICES - from) }, (_, k) =>
          devices.publishAsync(`plant/${from + k}/state`, `on ${from + k}`, { qos: 1, retain: true }),
        ),
      );
    }
    await devices.publishAsync("dev/7/cmd", "reboot", { qos: 1, retain: true });
    await devices.endAsync();
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await nats?.stop();
  });

  it("a dashboard subscribing to every device's state gets all 1,100 retained states, as a 3.1.1 client does too", async () => {
    for (const protocolVersion of [5, 4] as const) {
      const dashboard = await connectMqtt(gw.port("mqtt"), { protocolVersion });
      const inbox = collect(dashboard);
      await dashboard.subscribeAsync("plant/+/state", { qos: 1 });
      const got = await inbox.count(DEVICES, 20_000);
      expect(new Set(got.map((m) => m.topic)).size).toBe(DEVICES);
      expect(got.every((m) => m.packet.retain && m.payload.toString() === `on ${m.topic.split("/")[1]}`)).toBe(true);
      await dashboard.endAsync();
    }
  });

  it("one SUBSCRIBE of a device's own topic and the fleet's gets each filter's retained messages, once per filter", async () => {
    const device = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    const inbox = collect(device);
    await device.subscribeAsync({ "dev/7/cmd": { qos: 1 }, "plant/1/#": { qos: 1 }, "dev/+/cmd": { qos: 0 } });
    const got = await inbox.count(3);
    // The device's command matches two of the filters: once each, at each one's QoS.
    expect(got.map((m) => [m.topic, m.packet.qos, m.payload.toString()]).sort()).toEqual([
      ["dev/7/cmd", 0, "reboot"],
      ["dev/7/cmd", 1, "reboot"],
      ["plant/1/state", 1, "on 1"],
    ]);
    await device.endAsync();
  });

  /** Subscriptions on one reply subject (a request's own inbox, not a connection's `<prefix>.*`), over every NATS connection. */
  async function replyInboxes(): Promise<string[]> {
    return (await natsSubscriptions(monitor))
      .map((s) => s.subject)
      .filter((subject) => /inbox/i.test(subject) && !/[*>]/.test(subject));
  }

  it("the retained reads of twenty SUBSCRIBEs leave no NATS subscription behind", async () => {
    const before = await replyInboxes();
    const device = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    const inbox = collect(device);
    // Each SUBSCRIBE reads its filter's retained messages in a direct read of its own; one holds one.
    await Promise.all(Array.from({ length: 19 }, (_, k) => device.subscribeAsync(`quiet/${k}/state`, { qos: 1 })));
    await device.subscribeAsync("plant/3/state", { qos: 1 });
    expect((await inbox.count(1)).map((m) => m.payload.toString())).toEqual(["on 3"]);
    // Each read's reply subscription goes when its batch ends; nats.js's iterator form of the
    // read kept each for its 5 s timeout.
    await eventually(
      async () => ((await replyInboxes()).length <= before.length ? true : undefined),
      2_000,
      "the reads' reply subscriptions gone",
    );
    await device.endAsync();
  });
});
