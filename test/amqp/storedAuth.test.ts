// CONTRACT error table, stored sends: a JetStream publish NATS refuses for the client's
// permissions is amqp:unauthorized-access; one JetStream did not store (here: no stream
// answers) is amqp:internal-error. The NATS-down case is in test/faults/natsRestart.test.ts.
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { AmqpClient, send } from "./rheaClient.js";

const SERVER = `
authorization {
  users: [
    { user: "gw", password: "gw-pw" },
    { user: "limited", password: "limited-pw", permissions: { publish: { deny: ["st.denied.>"] } } }
  ]
}
no_auth_user: "gw"
`;

describe("AMQP stored sends: which refusal is whose", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let gw: GatewayHandle;
  let c: AmqpClient;

  beforeAll(async () => {
    nats = await startNatsServer({ config: SERVER });
    nc = await connect({ servers: nats.url });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "ST", subjects: ["st.>"] });
    gw = await startGateway({ nats: nats.url, config: { bindings: [{ stream: "ST" }] } });
    c = await AmqpClient.open(gw.port("amqp"), { username: "limited", password: "limited-pw" });
  });
  afterAll(async () => {
    await c?.close();
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("a stored send NATS refuses for the client's permissions is rejected amqp:unauthorized-access", async () => {
    const denied = await c.sender("st.denied.1");
    expect(await send(denied, { body: "no" })).toMatchObject({
      state: "rejected",
      error: { condition: "amqp:unauthorized-access" },
    });
    const allowed = await c.sender("st.allowed.1");
    expect(await send(allowed, { body: "yes" })).toEqual({ state: "accepted" });
  });

  it("a stored send whose stream is gone is rejected amqp:internal-error, not unauthorized-access", async () => {
    const sender = await c.sender("st.gone.1");
    await (await jetstreamManager(nc)).streams.delete("ST");
    expect(await send(sender, { body: "nobody stores it" })).toMatchObject({
      state: "rejected",
      error: { condition: "amqp:internal-error" },
    });
  });
});
