// A QoS 2 publish is passed on once [MQTT-4.3.3-9], also when the client resends it, in
// the same connection or after a reconnect (the session remembers the packet ids it
// PUBRECed: decision 4, inboundState.ts).
import type mqttPacket from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const persistent = (clientId: string) => ({ clientId, clean: false, properties: { sessionExpiryInterval: 600 } });

describe("QoS 2 publishes are passed on once", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;

  beforeAll(async () => {
    nats = await startNatsServer();
    gw = await startGateway({ nats: nats.url });
  });
  afterAll(async () => {
    await gw?.stop();
    await nats?.stop();
  });

  const publish = (c: RawMqtt, topic: string, payload: string, dup: boolean) =>
    c.send({
      cmd: "publish",
      topic,
      payload: Buffer.from(payload),
      qos: 2,
      messageId: 1,
      retain: false,
      dup,
    } as mqttPacket.Packet);

  /** A persistent QoS 2 subscriber that reads `topic`; what it gets is counted after a marker arrives. */
  async function subscriber(clientId: string, topic: string) {
    const sub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, ...persistent(clientId) });
    await sub.subscribeAsync(topic, { qos: 2 });
    return { sub, inbox: collect(sub) };
  }

  it("a resend before PUBREL, in the same connection, is answered PUBREC and not published again", async () => {
    const { sub, inbox } = await subscriber("q2-sub-same", "q2/same");
    const c = await RawMqtt.connected(gw.port("mqtt"), 5, persistent("q2-pub-same"));
    publish(c, "q2/same", "once", false);
    expect(((await c.next("pubrec")) as mqttPacket.IPubrecPacket).reasonCode ?? 0).toBe(0);
    publish(c, "q2/same", "once", true);
    expect(((await c.next("pubrec")) as mqttPacket.IPubrecPacket).reasonCode ?? 0).toBe(0);
    c.send({ cmd: "pubrel", messageId: 1 } as mqttPacket.Packet);
    expect(((await c.next("pubcomp")) as mqttPacket.IPubcompPacket).reasonCode ?? 0).toBe(0);
    // After PUBCOMP, packet id 1 is free: a new message on it is a new message.
    publish(c, "q2/same", "next", false);
    await c.next("pubrec");
    c.send({ cmd: "pubrel", messageId: 1 } as mqttPacket.Packet);
    await c.next("pubcomp");
    const seen = await inbox.count(2);
    expect(seen.map((s) => s.payload.toString())).toEqual(["once", "next"]);
    c.end();
    await sub.endAsync();
  });

  // The session keeps its InboundState (the packet ids it PUBRECed) at detach and restores
  // it on resume: without that the resend would be taken for a new message.
  it("a resend after a reconnect, of a publish PUBRECed before the connection dropped, is answered and not published again", async () => {
    const { sub, inbox } = await subscriber("q2-sub-again", "q2/again");
    const first = await RawMqtt.connected(gw.port("mqtt"), 5, persistent("q2-pub-again"));
    publish(first, "q2/again", "exactly once", false);
    await first.next("pubrec");
    first.socket.destroy(); // the PUBREC was lost with the connection, as far as the client knows

    const again = await RawMqtt.connected(gw.port("mqtt"), 5, persistent("q2-pub-again"));
    publish(again, "q2/again", "exactly once", true);
    expect(((await again.next("pubrec")) as mqttPacket.IPubrecPacket).reasonCode ?? 0).toBe(0);
    again.send({ cmd: "pubrel", messageId: 1 } as mqttPacket.Packet);
    // The session knew packet id 1: PUBCOMP success, not 0x92 (packet identifier not found).
    expect(((await again.next("pubcomp")) as mqttPacket.IPubcompPacket).reasonCode ?? 0).toBe(0);
    publish(again, "q2/again", "marker", false);
    await again.next("pubrec");
    const seen = await inbox.count(2);
    expect(seen.map((s) => s.payload.toString())).toEqual(["exactly once", "marker"]);
    again.end();
    await sub.endAsync();
  });
});
