// Issue 4: transfers a sender gives up on (part 2, 2.7.5 `aborted`) and multi-frame
// messages over max-message-size. The frames are written raw on an rhea client's socket
// (rhea cannot abort); a NATS subscriber on the subject proves what was published.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Socket } from "node:net";
import { join } from "node:path";
import { connect, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import type { Sender } from "rhea";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { AmqpClient, detached, rhea, send } from "./rheaClient.js";

const frames = createRequire(import.meta.url)("rhea/lib/frames.js") as {
  write_frame(f: { type: number; channel: number; performative?: unknown; payload?: Buffer }): Buffer;
  transfer(fields: Record<string, unknown>): unknown;
};

const MAX_FRAME = 4096;
const MAX_PAYLOAD = 65_536;
/** What the oversized message's frames add up to. */
const SENT = 128 * 1024 * 1024;
let n = 0;
const unique = (prefix: string) => `${prefix}.${process.pid}x${++n}`;

interface SenderInternals {
  local: { handle: number };
  session: {
    local: { channel: number };
    outgoing: { next_delivery_id: number; next_pending_delivery: number; deliveries: { size: number } };
    on_disposition(frame: { performative: Record<string, unknown> }): void;
  };
  on_flow(frame: { performative: Record<string, unknown> }): void;
}

/** Writes what rhea would never send on a sender's link, and watches what comes back. */
function rawSide(c: AmqpClient, sender: Sender) {
  const i = sender as unknown as SenderInternals;
  const socket = (c.conn as unknown as { socket: Socket }).socket;
  const dispositions: Array<{ first: number; last: number }> = [];
  const flows: Array<{ delivery_count: number; link_credit: number }> = [];
  const onDisposition = i.session.on_disposition.bind(i.session);
  i.session.on_disposition = (f) => {
    const first = Number(f.performative.first);
    dispositions.push({ first, last: Number(f.performative.last ?? first) });
    onDisposition(f);
  };
  const onFlow = i.on_flow.bind(sender);
  i.on_flow = (f) => {
    flows.push({
      delivery_count: Number(f.performative.delivery_count),
      link_credit: Number(f.performative.link_credit),
    });
    onFlow(f);
  };
  return {
    dispositions,
    flows,
    /**
     * A delivery-id of the client's session that rhea will not use for its own sends:
     * taken while rhea holds no delivery, so its buffer (indexed from its head's id) and
     * its pending pointer stay in step.
     */
    nextId: () => {
      const out = i.session.outgoing;
      if (out.deliveries.size !== 0) throw new Error("rhea still holds deliveries");
      out.next_pending_delivery++;
      return out.next_delivery_id++;
    },
    frame: (fields: Record<string, unknown>, payload?: Buffer) =>
      frames.write_frame({
        type: 0,
        channel: i.session.local.channel,
        performative: frames.transfer({ handle: i.local.handle, ...fields }),
        ...(payload ? { payload } : {}),
      }),
    write: (...buffers: Buffer[]) => socket.write(buffers.length === 1 ? buffers[0]! : Buffer.concat(buffers)),
  };
}

const sendable = (s: Sender) => new Promise<void>((r) => (s.sendable() ? r() : s.once("sendable", () => r())));

/** Every message NATS delivered on a subscription so far, as text. */
function collected(sub: Subscription): string[] {
  const got: string[] = [];
  void (async () => {
    for await (const m of sub) got.push(Buffer.from(m.data).toString("latin1"));
  })();
  return got;
}

describe("aborted and oversized multi-frame transfers", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false, config: `max_payload: ${MAX_PAYLOAD}` });
    gw = await startGateway({ nats: nats.url, config: { amqp: { listen: "127.0.0.1:0", max_frame_size: MAX_FRAME } } });
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("an aborted multi-frame message is discarded: never published, no disposition, the link goes on", async () => {
    const c = await AmqpClient.open(gw.port("amqp"));
    const subject = unique("aborted");
    const got = collected(nc.subscribe(subject));
    await nc.flush();
    const sender = await c.sender(subject);
    await sendable(sender);
    const raw = rawSide(c, sender);
    const encoded = rhea.message.encode({ body: rhea.message.data_section(Buffer.alloc(10_000, 0x61)) }) as Buffer;
    const [a, b, rest] = [encoded.subarray(0, 3_000), encoded.subarray(3_000, 6_000), encoded.subarray(6_000)];
    const id = raw.nextId();
    const tag = Buffer.from(`t${id}`);
    raw.write(
      raw.frame({ delivery_id: id, delivery_tag: tag, message_format: 0, settled: false, more: true }, a),
      raw.frame({ more: true }, b),
      // The aborting frame's payload, here the rest of the message, is ignored too.
      raw.frame({ aborted: true }, rest),
    );
    expect(await send(sender, { body: rhea.message.data_section(Buffer.from("after the abort")) })).toEqual({
      state: "accepted",
    });
    await nc.flush();
    await eventually(() => (got.length > 0 ? true : undefined));
    expect(got).toEqual(["after the abort"]);
    expect(raw.dispositions.some((d) => d.first <= id && id <= d.last)).toBe(false);
    await c.close();
  });

  it("Qpid Proton aborts a delivery whose bytes it had streamed (pn_delivery_abort): nothing published, the next one accepted", async () => {
    const subject = unique("aborted.proton");
    const got = collected(nc.subscribe(subject));
    await nc.flush();
    const out = execFileSync(
      "/usr/bin/python3",
      [join(import.meta.dirname, "clients/abort.py"), `amqp://127.0.0.1:${gw.port("amqp")}`, subject],
      { encoding: "utf8", timeout: 15_000 },
    );
    const lines = out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toEqual([{ aborted: true }, { outcome: "accepted" }]);
    await nc.flush();
    await eventually(() => (got.length > 0 ? true : undefined));
    expect(got).toEqual(["after the abort"]);
  });

  it("aborted in its first frame, unsettled or presettled: discarded, no disposition", async () => {
    const c = await AmqpClient.open(gw.port("amqp"));
    const subject = unique("aborted.first");
    const got = collected(nc.subscribe(subject));
    await nc.flush();
    const sender = await c.sender(subject);
    await sendable(sender);
    const raw = rawSide(c, sender);
    const payload = rhea.message.encode({ body: rhea.message.data_section(Buffer.from("never")) }) as Buffer;
    const ids = [raw.nextId(), raw.nextId()];
    raw.write(
      ...ids.map((id, k) =>
        raw.frame(
          { delivery_id: id, delivery_tag: Buffer.from(`f${id}`), message_format: 0, settled: k === 1, aborted: true },
          payload,
        ),
      ),
    );
    expect(await send(sender, { body: rhea.message.data_section(Buffer.from("kept")) })).toEqual({ state: "accepted" });
    await nc.flush();
    await eventually(() => (got.length > 0 ? true : undefined));
    expect(got).toEqual(["kept"]);
    expect(raw.dispositions.some((d) => ids.some((id) => d.first <= id && id <= d.last))).toBe(false);
    await c.close();
  });

  it("more aborted deliveries than the link's credit: each one's credit is given back, the link keeps flowing", async () => {
    const c = await AmqpClient.open(gw.port("amqp"));
    const subject = unique("aborted.many");
    const got = collected(nc.subscribe(subject));
    await nc.flush();
    const sender = await c.sender(subject);
    await sendable(sender);
    const credit = (sender as unknown as { credit: number }).credit;
    const raw = rawSide(c, sender);
    const encoded = rhea.message.encode({ body: rhea.message.data_section(Buffer.alloc(6_000, 0x62)) }) as Buffer;
    const count = credit * 2 + 10;
    const burst: Buffer[] = [];
    for (let k = 0; k < count; k++) {
      const id = raw.nextId();
      burst.push(
        raw.frame(
          { delivery_id: id, delivery_tag: Buffer.from(`m${id}`), message_format: 0, settled: false, more: true },
          encoded.subarray(0, 3_000),
        ),
        raw.frame({ aborted: true }),
      );
    }
    raw.write(...burst);
    // The flows that answer the aborts count every delivery and leave the credit open.
    const last = await eventually(() => raw.flows.find((f) => f.delivery_count >= count));
    expect(last.link_credit).toBeGreaterThan(0);
    expect(await send(sender, { body: rhea.message.data_section(Buffer.from("still flowing")) })).toEqual({
      state: "accepted",
    });
    await nc.flush();
    await eventually(() => (got.length > 0 ? true : undefined));
    expect(got).toEqual(["still flowing"]);
    expect(raw.dispositions).toHaveLength(1);
    await c.close();
  });

  it("a multi-frame message over max-message-size: detached amqp:link:message-size-exceeded, nothing published, its frames not kept", async () => {
    const c = await AmqpClient.open(gw.port("amqp"));
    const subject = unique("oversize");
    const got = collected(nc.subscribe(subject));
    await nc.flush();
    const sender = await c.sender(subject);
    await sendable(sender);
    const raw = rawSide(c, sender);
    const gone = detached(sender, "sender");
    const id = raw.nextId();
    const part = Buffer.alloc(MAX_FRAME - 64, 0x63);
    const middle = raw.frame({ more: true }, part);
    const count = Math.ceil(SENT / middle.length);
    const before = rssOf(gw);
    raw.write(raw.frame({ delivery_id: id, delivery_tag: Buffer.from(`o${id}`), message_format: 0, more: true }, part));
    for (let k = 0; k < count; k++) raw.write(middle);
    raw.write(raw.frame({ more: false }, part));
    expect(await gone).toMatchObject({ condition: "amqp:link:message-size-exceeded" });
    // The same connection still publishes, on a new link; by then every frame above was read.
    const other = unique("after.oversize");
    const otherGot = collected(nc.subscribe(other));
    await nc.flush();
    expect(await send(await c.sender(other), { body: rhea.message.data_section(Buffer.from("fine")) })).toEqual({
      state: "accepted",
    });
    await nc.flush();
    await eventually(() => (otherGot.length > 0 ? true : undefined));
    expect(got).toEqual([]);
    // Kept, the frames would be all of SENT (about 2.5 times that measured); dropped as
    // they come, the gateway grows by what the garbage collector has yet to take: about
    // 40 MB on Node 20, up to 1.2 x SENT on Node 24, whose runtime leaves more read buffers
    // uncollected for a while (a plain socket reader shows 40 vs 76 MiB for 128 MiB read).
    expect(rssOf(gw) - before).toBeLessThan(1.75 * SENT);
    await c.close();
  });
});

/** The gateway process's resident memory, in bytes (Linux). */
function rssOf(gw: GatewayHandle): number {
  const status = readFileSync(`/proc/${gw.process.pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]) * 1024;
}
