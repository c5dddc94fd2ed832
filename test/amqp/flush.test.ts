// Issue 4, item 4: an unsettled send to an unstored subject is settled only after the
// NATS flush. While nats-server is away the flush cannot complete, so no `accepted` may
// arrive; once it is back the send gets its answer (accepted, or rejected
// amqp:internal-error when the flush failed: CONTRACT, never a silent accept).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { AmqpClient, type Outcome, rhea, send } from "./rheaClient.js";

describe("unsettled sends to unstored subjects wait for the NATS flush", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;

  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false });
    gw = await startGateway({ nats: nats.url, config: { amqp: { listen: "127.0.0.1:0" } } });
  });
  afterAll(async () => {
    await gw?.stop();
    await nats?.stop();
  });

  const health = async () => (await fetch(`http://127.0.0.1:${gw.port("http")}/healthz`)).status;

  it("no accepted while NATS is down; an answer once it is back", async () => {
    const amqp = await AmqpClient.open(gw.port("amqp"), { container_id: "flush-test" });
    const sender = await amqp.sender(`flush.${process.pid}`);
    expect(await send(sender, { body: rhea.message.data_section(Buffer.from("up")) })).toEqual({ state: "accepted" });
    await nats.stop();
    await eventually(async () => ((await health()) === 503 ? true : undefined), 10_000, "NATS gone");
    let outcome: Outcome | undefined;
    const answered = send(sender, { body: rhea.message.data_section(Buffer.from("while down")) }).then((o) => {
      outcome = o;
      return o;
    });
    try {
      // Frames are read in order: once the gateway has answered an attach sent after the
      // transfer, it has read the transfer. A gateway settling before the flush would
      // have sent its disposition first. A rejection may already be there: the flush gives
      // up after its timeout, which a loaded machine can reach before the probe's answer.
      const probe = await amqp.sender(`flush.probe.${process.pid}`);
      expect(await health()).toBe(503);
      expect(outcome?.state).not.toBe("accepted");
      probe.close();
    } finally {
      nats = await startNatsServer({ port: nats.port });
    }
    const o = await answered;
    expect([{ state: "accepted" }, { state: "rejected", error: { condition: "amqp:internal-error" } }]).toContainEqual(
      o.state === "rejected" ? { state: o.state, error: { condition: o.error.condition } } : o,
    );
    await amqp.close();
  });
});
