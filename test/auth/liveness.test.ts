// Issue 13, finding 6: liveness took the account from the request body, so an ask in one
// account could take over (disconnect, 0x8E) a client of another. The account is the one
// whose connection received the ask.
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const serverConfig = `
accounts {
  A { jetstream: enabled, users: [ { user: gwa, password: gwa }, { user: a1, password: a1 } ] }
  B { jetstream: enabled, users: [ { user: gwb, password: gwb }, { user: b1, password: b1 } ] }
}
`;

describe("liveness asks are scoped to the account that carried them", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let a: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer({ config: serverConfig });
    gw = await startGateway({
      nats: nats.url,
      config: {
        gateway_users: { A: { user: "gwa", password: "gwa" }, B: { user: "gwb", password: "gwb" } },
        routing: [
          { username: "a*", account: "A" },
          { username: "b*", account: "B" },
        ],
        log: { level: "info", format: "json" },
      },
    });
    a = await connect({ servers: nats.url, user: "a1", pass: "a1" });
    // Each account's liveness actor subscribes once its gateway user is connected.
    await eventually(
      () => a.request(`$MQG.alive.${gw.id}`, "", { timeout: 500 }).then(() => true),
      10_000,
      "liveness in A",
    );
  });
  afterAll(async () => {
    await a?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("an ask in account A naming account B's client takes nothing over; the same ask in B does", async () => {
    const victim = await RawMqtt.connected(gw.port("mqtt"), 5, {
      clientId: "victim",
      username: "b1",
      password: Buffer.from("b1"),
    });
    const reply = await a.request(
      `$MQG.alive.${gw.id}`,
      JSON.stringify({ takeover: { account: "B", client_id: "victim" } }),
      { timeout: 5_000 },
    );
    expect(reply.json()).toMatchObject({ alive: true, taken_over: 0 });
    victim.send({ cmd: "pingreq" } as mqtt.Packet);
    await victim.next("pingresp");
    expect(victim.closed).toBe(false);

    // The gateway that owns a session asks in the session's account: that still works.
    const b = await connect({ servers: nats.url, user: "b1", pass: "b1" });
    await eventually(
      () => b.request(`$MQG.alive.${gw.id}`, "", { timeout: 500 }).then(() => true),
      10_000,
      "liveness in B",
    );
    const inB = await b.request(
      `$MQG.alive.${gw.id}`,
      JSON.stringify({ takeover: { account: "A", client_id: "victim" } }),
      { timeout: 5_000 },
    );
    expect(inB.json()).toMatchObject({ alive: true, taken_over: 1 });
    expect(((await victim.next("disconnect")) as mqtt.IDisconnectPacket).reasonCode).toBe(0x8e);
    await b.close();
  });
});
