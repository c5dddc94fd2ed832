// A clean start right after nats-server came back: its read of the sessions bucket goes out
// once the gateway's JetStream connection is back (client/jetStreamPacing.ts `follow`), so
// it finds the stored session and clears it. Sent while that connection was still dialling
// again (a client's connection, back first, had let the test go on), nats.js dropped it: the
// clean start waited out the read's 5 s timeout, past the client's own 5 s for its CONNACK,
// and would then have been served fresh with the old session left in place.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";

describe("JetStream reads right after nats-server comes back", () => {
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

  const reconnects = async () => {
    const text = await (await fetch(`http://127.0.0.1:${gw.port("http")}/metrics`)).text();
    const line = text.split("\n").find((l) => l.startsWith("mqgw_nats_reconnects_total "));
    return Number(line?.split(" ").pop() ?? 0);
  };
  const persistent = (clientId: string) => ({
    protocolVersion: 5 as const,
    clientId,
    clean: false,
    properties: { sessionExpiryInterval: 600 },
  });

  it("a clean start clears the stored session it reads, each time nats-server has just restarted", async () => {
    for (let round = 0; round < 3; round++) {
      const clientId = `back-${round}`;
      const first = await connectMqtt(gw.port("mqtt"), persistent(clientId));
      await first.subscribeAsync(`back/${round}`, { qos: 1 });
      await first.endAsync();
      // A client connected across the restart: its NATS connection may be back before the gateway's own.
      const keeper = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, clientId: `keeper-${round}` });
      const before = await reconnects();
      await nats.stop();
      nats = await startNatsServer({ port: nats.port, storeDir: nats.storeDir });
      await eventually(async () => ((await reconnects()) > before ? true : undefined), 15_000, "NATS back");
      keeper.end(true);

      const clean = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, clientId, clean: true });
      expect(clean.connack.sessionPresent).toBe(false);
      await clean.endAsync();
      // Cleared: nothing to resume.
      const again = await connectMqtt(gw.port("mqtt"), persistent(clientId));
      expect(again.connack.sessionPresent, `round ${round}`).toBe(false);
      await again.endAsync();
    }
  });
});
