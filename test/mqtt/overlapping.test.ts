// Issue 26, item 2: a message matching several non-shared subscriptions of one client goes
// out once, at the highest QoS among them, with every matching Subscription Identifier
// [MQTT-3.3.4-2, -4] (docs/decisions/overlapping-subscriptions.md): live, from the MQTT
// store, for mqtt.js and Debian's paho. "Nothing more came" is told by a marker sent after
// (one NATS connection keeps the order) or by the consumers having acknowledged everything.
import { join } from "node:path";
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectCollecting, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { runPython } from "../helpers/python.js";

const paho = (args: string[]) => runPython(join(import.meta.dirname, "clients", "paho_client.py"), args);
const ids = (p: { properties?: { subscriptionIdentifier?: number | number[] } }) =>
  [p.properties?.subscriptionIdentifier ?? []].flat().sort((a, b) => a - b);

describe("overlapping subscriptions of one client", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let port: number;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "OVB", subjects: ["ovb.>"] });
    gw = await startGateway({ nats: nats.url, config: { bindings: [{ stream: "OVB" }] } });
    port = gw.port("mqtt");
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("mqtt.js: one copy at the highest QoS with every matching identifier; a topic one filter matches keeps its own", async () => {
    const c = await connectMqtt(port, { protocolVersion: 5, clientId: "ov-js" });
    const inbox = collect(c);
    await c.subscribeAsync("ov/+", { qos: 0, properties: { subscriptionIdentifier: 7 } });
    await c.subscribeAsync("ov/#", { qos: 1, properties: { subscriptionIdentifier: 9 } });
    await c.subscribeAsync("ov/a", { qos: 2 });
    await c.subscribeAsync("ovm/end", { qos: 0, properties: { subscriptionIdentifier: 1 } });
    const pub = await connectMqtt(port, { protocolVersion: 5 });
    await pub.publishAsync("ov/a", "three", { qos: 2 });
    await pub.publishAsync("ov/b", "two", { qos: 2 });
    await pub.publishAsync("ov/b/c", "one", { qos: 2 });
    await pub.publishAsync("ovm/end", "end", { qos: 0 });
    await eventually(() => inbox.seen.find((m) => m.topic === "ovm/end"), 5_000, "the marker");
    const got = inbox.seen.map((m) => ({ topic: m.topic, qos: m.packet.qos, ids: ids(m.packet) }));
    expect(got).toEqual([
      { topic: "ov/a", qos: 2, ids: [7, 9] },
      { topic: "ov/b", qos: 1, ids: [7, 9] },
      { topic: "ov/b/c", qos: 1, ids: [9] },
      { topic: "ovm/end", qos: 0, ids: [1] },
    ]);
    await Promise.all([c.endAsync(), pub.endAsync()]);
  });

  it("MQTT 3.1.1 too: one copy at the highest QoS [MQTT-3.3.5-1]", async () => {
    const c = await connectMqtt(port, { protocolVersion: 4, clientId: "ov-v4" });
    const inbox = collect(c);
    await c.subscribeAsync("ov4/+", { qos: 0 });
    await c.subscribeAsync("ov4/#", { qos: 1 });
    await c.subscribeAsync("ov4m/end", { qos: 0 });
    const pub = await connectMqtt(port, { protocolVersion: 4 });
    await pub.publishAsync("ov4/a", "a", { qos: 1 });
    await pub.publishAsync("ov4m/end", "end", { qos: 0 });
    await eventually(() => inbox.seen.find((m) => m.topic === "ov4m/end"), 5_000, "the marker");
    expect(inbox.seen.map((m) => [m.topic, m.packet.qos])).toEqual([
      ["ov4/a", 1],
      ["ov4m/end", 0],
    ]);
    await Promise.all([c.endAsync(), pub.endAsync()]);
  });

  it("a shared subscription stands apart: it and a plain filter each get their copy", async () => {
    const c = await connectMqtt(port, { protocolVersion: 5, clientId: "ov-share" });
    const inbox = collect(c);
    await c.subscribeAsync("$share/g/ovs/t", { qos: 0, properties: { subscriptionIdentifier: 1 } });
    await c.subscribeAsync("ovs/+", { qos: 0, properties: { subscriptionIdentifier: 2 } });
    nc.publish("ovs.t", "x");
    const seen = await inbox.count(2);
    expect(seen.map((m) => ids(m.packet)[0]).sort()).toEqual([1, 2]);
    await c.endAsync();
  });

  it("No Local: the client's own message comes once with the identifiers of the other subscriptions only; another's with all", async () => {
    const me = await connectMqtt(port, { protocolVersion: 5, clientId: "ov-nl" });
    const inbox = collect(me);
    await me.subscribeAsync("ovn/t", { qos: 1, nl: true, properties: { subscriptionIdentifier: 1 } });
    await me.subscribeAsync("ovn/+", { qos: 0, properties: { subscriptionIdentifier: 2 } });
    await me.subscribeAsync("ovq/a", { qos: 1, nl: true, properties: { subscriptionIdentifier: 3 } });
    await me.subscribeAsync("ovq/+", { qos: 1, nl: true, properties: { subscriptionIdentifier: 4 } });
    await me.subscribeAsync("ovnm/end", { qos: 1, properties: { subscriptionIdentifier: 5 } });
    await me.publishAsync("ovq/a", "own, every subscription No Local", { qos: 1 });
    await me.publishAsync("ovn/t", "own", { qos: 1 });
    const other = await connectMqtt(port, { protocolVersion: 5 });
    await other.publishAsync("ovn/t", "theirs", { qos: 1 });
    await other.publishAsync("ovq/a", "theirs too", { qos: 1 });
    await other.publishAsync("ovnm/end", "end", { qos: 1 });
    await eventually(() => inbox.seen.find((m) => m.payload.toString() === "end"), 5_000, "the marker");
    const got = inbox.seen.map((m) => ({ payload: m.payload.toString(), qos: m.packet.qos, ids: ids(m.packet) }));
    expect(got).toEqual([
      { payload: "own", qos: 0, ids: [2] },
      { payload: "theirs", qos: 1, ids: [1, 2] },
      { payload: "theirs too", qos: 1, ids: [3, 4] },
      { payload: "end", qos: 1, ids: [5] },
    ]);
    await Promise.all([me.endAsync(), other.endAsync()]);
  });

  it("Retain As Published on one of them keeps RETAIN on the one copy", async () => {
    const c = await connectMqtt(port, { protocolVersion: 5, clientId: "ov-rap" });
    const inbox = collect(c);
    await c.subscribeAsync("ovr/+", { qos: 0, rap: true, rh: 2, properties: { subscriptionIdentifier: 1 } });
    await c.subscribeAsync("ovr/#", { qos: 0, rh: 2, properties: { subscriptionIdentifier: 2 } });
    const pub = await connectMqtt(port, { protocolVersion: 5 });
    await pub.publishAsync("ovr/t", "kept", { qos: 1, retain: true });
    await pub.publishAsync("ovr/t/u", "cleared", { qos: 1, retain: true });
    await c.subscribeAsync("ovrm/end", { qos: 0 });
    await pub.publishAsync("ovrm/end", "end", { qos: 1 });
    await eventually(() => inbox.seen.find((m) => m.topic === "ovrm/end"), 5_000, "the marker");
    const got = inbox.seen.map((m) => [m.payload.toString(), m.packet.retain, ids(m.packet).join(",")]);
    expect(got).toEqual([
      ["kept", true, "1,2"],
      ["cleared", false, "2"],
      ["end", false, ""],
    ]);
    for (const t of ["ovr/t", "ovr/t/u"]) await pub.publishAsync(t, "", { qos: 1, retain: true });
    await Promise.all([c.endAsync(), pub.endAsync()]);
  });

  it("paho: one copy carrying both identifiers", async () => {
    const c = paho([
      String(port),
      ...["--sub", "ovp/t", "--sub", "ovp/#", "--sub", "ovpm/end"],
      ...["--sub-id", "2", "--sub-id", "3", "--sub-id", "4"],
      ...["--qos", "1", "--expect", "2", "--seconds", "15"],
    ]);
    await c.upTo(4); // CONNACK, three SUBACKs
    nc.publish("ovp.t", "x");
    nc.publish("ovpm.end", "end");
    await c.line((l) => l.done !== undefined);
    const msgs = c.lines
      .filter((l) => l.message)
      .map((l) => l.message as { topic: string; properties: { SubscriptionIdentifier?: number[] } });
    expect(msgs.map((m) => [m.topic, [...(m.properties.SubscriptionIdentifier ?? [])].sort()])).toEqual([
      ["ovp/t", [2, 3]],
      ["ovpm/end", [4]],
    ]);
  });

  it("a persistent session's stored QoS 1/2 subscriptions: each message once, from the older subscription's consumer, the other consumer's copy acknowledged", async () => {
    const session = {
      protocolVersion: 5 as const,
      clientId: "ov-stored",
      clean: false,
      properties: { sessionExpiryInterval: 600 },
    };
    const sub = await connectMqtt(port, session);
    await sub.subscribeAsync("ovst/+", { qos: 1, properties: { subscriptionIdentifier: 1 } });
    await sub.subscribeAsync("ovst/#", { qos: 2, properties: { subscriptionIdentifier: 2 } });
    await sub.endAsync();
    const pub = await connectMqtt(port, { protocolVersion: 5 });
    for (let i = 0; i < 5; i++) await pub.publishAsync("ovst/x", `away${i}`, { qos: 2 });

    const { client: back, inbox } = await connectCollecting(port, { ...session, resubscribe: false });
    expect(back.connack.sessionPresent).toBe(true);
    for (let i = 0; i < 3; i++) await pub.publishAsync("ovst/y", `live${i}`, { qos: 1 });
    await inbox.count(8);
    // Everything read and acknowledged by both consumers: any other copy would have come before.
    await eventually(
      async () => {
        const consumers = await jsm.consumers.list("MQGW_MSGS").next();
        const mine = consumers.filter((ci) => ci.num_ack_pending > 0 || ci.num_pending > 0);
        return consumers.length >= 2 && mine.length === 0 ? true : undefined;
      },
      10_000,
      "both consumers drained",
    );
    const got = inbox.seen.map((m) => `${m.payload.toString()}@${m.packet.qos}:${ids(m.packet).join(",")}`);
    // Once each, in order on each topic (MQTT 4.6 orders a topic, not two: while the resumed
    // session's older consumer catches up, a live message may come from the younger one).
    expect(got.filter((g) => g.startsWith("away"))).toEqual(Array.from({ length: 5 }, (_, i) => `away${i}@2:1,2`));
    expect(got.filter((g) => g.startsWith("live"))).toEqual(Array.from({ length: 3 }, (_, i) => `live${i}@1:1,2`));
    expect(got).toHaveLength(8);
    await back.endAsync();
    // Nothing is handed back on the next connection: both consumers' copies were settled.
    const { client: again, inbox: later } = await connectCollecting(port, { ...session, resubscribe: false });
    await pub.publishAsync("ovst/z", "last", { qos: 1 });
    expect((await later.count(1)).map((m) => m.payload.toString())).toEqual(["last"]);
    await Promise.all([again.endAsync(), pub.endAsync()]);
  });

  it("on a bound stream too: QoS 1 messages once from its consumer with every identifier, plain NATS messages once from core at QoS 0", async () => {
    const session = {
      protocolVersion: 5 as const,
      clientId: "ov-bound",
      clean: false,
      properties: { sessionExpiryInterval: 600 },
    };
    const { client: sub, inbox } = await connectCollecting(port, session);
    await sub.subscribeAsync("ovb/+", { qos: 1, properties: { subscriptionIdentifier: 1 } });
    await sub.subscribeAsync("ovb/#", { qos: 1, properties: { subscriptionIdentifier: 2 } });
    await sub.subscribeAsync("ovb/t", { qos: 0, properties: { subscriptionIdentifier: 3 } });
    const pub = await connectMqtt(port, { protocolVersion: 5 });
    // `ovb/+` reads OVB; `ovb/#` is also `ovb`, which OVB does not cover: it reads the MQTT
    // store, and OVB's messages reach it from core NATS, as `ovb/t`'s do.
    for (let i = 0; i < 3; i++) await pub.publishAsync("ovb/t", `s${i}`, { qos: 1 });
    await inbox.count(3);
    nc.publish("ovb.t", "plain");
    await inbox.count(4);
    await eventually(
      async () => {
        const consumers = await jsm.consumers.list("OVB").next();
        const busy = consumers.filter((ci) => ci.num_ack_pending > 0 || ci.num_pending > 0);
        return consumers.length === 1 && busy.length === 0 ? true : undefined;
      },
      10_000,
      "the bound consumer drained",
    );
    // After the plain one, a marker on a topic only one filter matches: nothing else came between.
    await sub.subscribeAsync("ovbm/end", { qos: 0 });
    nc.publish("ovbm.end", "end");
    await eventually(() => inbox.seen.find((m) => m.topic === "ovbm/end"), 5_000, "the marker");
    const got = inbox.seen.map((m) => `${m.payload.toString()}@${m.packet.qos}:${ids(m.packet).join(",")}`);
    expect(got).toEqual(["s0@1:1,2,3", "s1@1:1,2,3", "s2@1:1,2,3", "plain@0:1,2,3", "end@0:"]);
    await Promise.all([sub.endAsync(), pub.endAsync()]);
  });
});
