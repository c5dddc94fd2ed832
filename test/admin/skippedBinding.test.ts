// Issue 25 item 7: a binding whose stream was missing at start is skipped with a warning
// that says what to do, and SIGHUP reads it again though the config did not change.
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";

describe("a binding skipped at start", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    gw = await startGateway({ nats: nats.url, config: { bindings: [{ stream: "LATE" }] } });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("warns with what to do, and SIGHUP reads it once the stream exists", async () => {
    const skipped = await gw.waitForLog((l) => String(l.msg).startsWith("binding skipped"));
    expect(skipped).toMatchObject({ stream: "LATE" });
    expect(String(skipped.msg)).toMatch(/create the stream.*then send SIGHUP/);

    await jsm.streams.add({ name: "LATE", subjects: ["late.>"] });
    gw.process.kill("SIGHUP");
    const read = await gw.waitForLog((l) => l.msg === "binding read: its stream is readable now");
    expect(read).toMatchObject({ stream: "LATE" });
    expect(await gw.waitForLog((l) => l.msg === "config reloaded")).toMatchObject({ changed: [] });

    // The subject is stored now: a QoS 1 publish lands in the operator's stream.
    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5 });
    await pub.publishAsync("late/x", "kept", { qos: 1 });
    await pub.endAsync();
    await eventually(async () => ((await jsm.streams.info("LATE")).state.messages === 1 ? true : undefined));
  });
});
