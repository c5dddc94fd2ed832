// Issue: "each AMQP connection, session and link is an xstate machine run as an actor".
// A session's actor (src/machines/amqpSession.ts) knows its links: the client ending one
// session takes that session's links (and their NATS subscriptions) away, and nothing else.
import { connect, type NatsConnection, NoRespondersError } from "@nats-io/transport-node";
import type { Receiver, Sender, Session } from "rhea";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { metric } from "../faults/util.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { AmqpClient, bodyText, collect, rhea, send } from "./rheaClient.js";

/** Resolves once the gateway answered the attach with a terminus of its own. */
function opened<L extends Sender | Receiver>(link: L, kind: "sender" | "receiver"): Promise<L> {
  return new Promise((resolve, reject) => {
    link.once(`${kind}_open`, () => resolve(link));
    link.once(`${kind}_close`, () => reject(new Error(`${kind} detached`)));
  });
}

function begun(session: Session): Promise<Session> {
  return new Promise((resolve) => {
    session.once("session_open", () => resolve(session));
    session.begin();
  });
}

/** Whether NATS has a subscriber on the subject: a request to none fails at once with no responders. */
async function subscribed(nc: NatsConnection, subject: string): Promise<boolean> {
  try {
    await nc.request(subject, "", { timeout: 300 });
    return true;
  } catch (e) {
    if (e instanceof NoRespondersError || (e as { cause?: unknown }).cause instanceof NoRespondersError) return false;
    // A subscriber that does not answer: the request timed out.
    return true;
  }
}

describe("AMQP sessions as actors", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false });
    nc = await connect({ servers: nats.url });
    gw = await startGateway({ nats: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  const actors = (machine: string) => metric(gw, "mqgw_actors", { machine });

  it("ending one session detaches its links in the gateway; the other session's links keep flowing", async () => {
    const c = await AmqpClient.open(gw.port("amqp"));
    const [one, two] = [await begun(c.conn.create_session()), await begun(c.conn.create_session())];
    // The gateway's begin offers handle-max: as many links as one connection may hold (256 + 256).
    expect((one as unknown as { remote: { begin: { handle_max: number } } }).remote.begin.handle_max).toBe(511);
    await opened(one.open_receiver({ source: "sess.one", snd_settle_mode: 1 }), "receiver");
    await opened(one.open_sender("sess.one.out"), "sender");
    const r2 = await opened(two.open_receiver({ source: "sess.two", snd_settle_mode: 1 }), "receiver");
    const s2 = await opened(two.open_sender("sess.two.out"), "sender");
    await eventually(async () => ((await actors("amqpSession")) === 2 ? true : undefined), 5_000, "two sessions");
    expect(await actors("amqpReceiverLink")).toBe(2);
    expect(await actors("amqpSenderLink")).toBe(2);
    expect(await subscribed(nc, "sess.one")).toBe(true);

    await new Promise<void>((resolve) => {
      one.once("session_close", () => resolve());
      one.close();
    });

    await eventually(async () => ((await actors("amqpSession")) === 1 ? true : undefined), 5_000, "one session left");
    await eventually(
      async () =>
        (await actors("amqpReceiverLink")) === 1 && (await actors("amqpSenderLink")) === 1 ? true : undefined,
      5_000,
      "the ended session's links gone",
    );
    await eventually(async () => ((await subscribed(nc, "sess.one")) ? undefined : true), 5_000, "unsubscribed");
    // The other session goes on, both ways.
    const got = collect(r2);
    nc.publish("sess.two", "still here");
    expect(bodyText((await got.next()).message)).toBe("still here");
    const sub = nc.subscribe("sess.two.out", { max: 1 });
    expect(await send(s2, { body: rhea.message.data_section(Buffer.from("and sending")) })).toEqual({
      state: "accepted",
    });
    for await (const m of sub) expect(m.string()).toBe("and sending");
    await c.close();
    await eventually(async () => ((await actors("amqpSession")) === 0 ? true : undefined), 5_000, "no session left");
  });

  it("an attach on a handle above the session's handle-max closes the connection amqp:connection:framing-error", async () => {
    const c = await AmqpClient.open(gw.port("amqp"));
    const session = await begun(c.conn.create_session());
    // rhea picks the lowest free handle: taking 0..511 makes its next attach use 512.
    const handles = (session as unknown as { local: { handles: Record<number, unknown> } }).local.handles;
    for (let h = 0; h < 512; h++) handles[h] = { placeholder: true };
    const closed = c.closed();
    session.open_receiver({ source: "sess.beyond", snd_settle_mode: 1 });
    expect(await closed).toMatchObject({ condition: "amqp:connection:framing-error" });
    await c.close();
  });
});
