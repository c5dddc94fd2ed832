// Clean starts skip their read of the sessions bucket only once they are frequent enough to
// pay for the index's echo of every record write (protocol/indexDemand.ts,
// docs/decisions/mqtt-sessions.md): seen from outside as the direct gets the account sees.
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sessionKey } from "../../src/actors/mqtt/kvSessionStore.js";
import { INDEX_DEMAND } from "../../src/protocol/indexDemand.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";

describe("the sessions bucket's index, made when clean starts pay for it", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let gw: GatewayHandle;
  /** The subjects of the direct gets the account saw (a session record's read names its key). */
  const reads: string[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    nc.subscribe("$JS.API.DIRECT.GET.>", { callback: (_e, m) => reads.push(m.subject) });
    await nc.flush();
    gw = await startGateway({ nats: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  /** A clean start (MQTT 5, no expiry): whether the gateway read the bucket for it. */
  async function cleanStartRead(clientId: string): Promise<boolean> {
    const c = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, clientId, clean: true });
    expect(c.connack.sessionPresent).toBe(false);
    await c.endAsync();
    // The read went to nats-server before the CONNACK was sent; its copy to this connection is ahead of the PONG.
    await nc.flush();
    return reads.some((s) => s.endsWith(`.${sessionKey(clientId)}`));
  }

  it("the first clean starts read; once there are enough of them, the index answers the next ones", async () => {
    for (let i = 0; i < INDEX_DEMAND.minCleanStarts - 1; i++) expect(await cleanStartRead(`few-${i}`)).toBe(true);
    // The next one makes it worth following: the index is made, and clean starts stop reading once it is complete.
    let unread = -1;
    for (let i = 0; i < 50 && unread < 0; i++) if (!(await cleanStartRead(`many-${i}`))) unread = i;
    expect(unread).toBeGreaterThanOrEqual(0);
  });

  it("a session written since is in the index: its clean start reads it and clears it", async () => {
    const kept = await connectMqtt(gw.port("mqtt"), {
      protocolVersion: 5,
      clientId: "indexed",
      clean: false,
      properties: { sessionExpiryInterval: 600 },
    });
    await kept.subscribeAsync("idx/x", { qos: 1 });
    await kept.endAsync();
    expect(await cleanStartRead("indexed")).toBe(true);
    const again = await connectMqtt(gw.port("mqtt"), {
      protocolVersion: 5,
      clientId: "indexed",
      clean: false,
      properties: { sessionExpiryInterval: 600 },
    });
    expect(again.connack.sessionPresent).toBe(false);
    await again.endAsync();
  });
});
