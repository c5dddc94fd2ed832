// Issue 4, items 1, 4 and 7: the connection as AMQP 1.0 defines it (headers, frame and
// message sizes, channels, idle timeout, TLS) and clients that break the rules. After
// each, the gateway is still up.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { type Socket, connect as tcpConnect } from "node:net";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { Sender } from "rhea";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HEADER_ROOM } from "../../src/protocol/natsLimits.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { makeCertificates } from "../helpers/tls.js";
import { AmqpClient, bodyText, collect, detached, rhea, send } from "./rheaClient.js";

const frames = createRequire(import.meta.url)("rhea/lib/frames.js") as {
  write_frame(f: { type: number; channel: number; performative?: unknown; payload?: Buffer }): Buffer;
  begin(fields: Record<string, unknown>): unknown;
  transfer(fields: Record<string, unknown>): unknown;
};

const MAX_FRAME = 4096;
const MAX_PAYLOAD = 65_536;
let n = 0;
const unique = (prefix: string) => `${prefix}.${process.pid}x${++n}`;

/** A raw TCP client: what it was sent back, and whether the gateway closed it. */
function raw(port: number) {
  const socket: Socket = tcpConnect(port, "127.0.0.1");
  let received = Buffer.alloc(0);
  let closed = false;
  socket.on("data", (d) => {
    received = Buffer.concat([received, d]);
  });
  socket.on("error", () => {});
  socket.on("close", () => {
    closed = true;
  });
  return {
    socket,
    received: () => received,
    closed: () => eventually(() => (closed ? true : undefined), 5_000, "the gateway closes the socket"),
  };
}

/** The socket under an rhea client, to write what rhea would never send. */
const socketOf = (c: AmqpClient) => (c.conn as unknown as { socket: Socket }).socket;

async function metric(gw: GatewayHandle, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${gw.port("http")}/metrics`)).text();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  return text
    .split("\n")
    .filter((l) => l.startsWith(`${name}{`) && want.every((w) => l.includes(w)))
    .reduce((sum, l) => sum + Number(l.split(" ").pop()), 0);
}

describe("AMQP connections and hostile clients", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  const certs = makeCertificates();

  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false, config: `max_payload: ${MAX_PAYLOAD}` });
    gw = await startGateway({
      nats: nats.url,
      config: {
        amqp: {
          listen: "127.0.0.1:0",
          max_frame_size: MAX_FRAME,
          tls: { listen: "127.0.0.1:0", cert_file: certs.cert, key_file: certs.key },
        },
        limits: { connect_timeout: "1s" },
      },
    });
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  /** The gateway still serves: a full round trip through it. */
  async function stillServing(): Promise<void> {
    const c = await AmqpClient.open(gw.port("amqp"));
    const subject = unique("alive");
    const r = collect(await c.receiver(subject));
    expect(await send(await c.sender(subject), { body: "alive" })).toEqual({ state: "accepted" });
    expect(bodyText((await r.next()).message)).toBe("alive");
    await c.close();
  }

  describe("the open (item 1)", () => {
    it("advertises max-frame-size, channel-max, idle-time-out and the anonymous relay", async () => {
      const c = await AmqpClient.open(gw.port("amqp"));
      const open = (c.conn as unknown as { remote: { open: Record<string, unknown> } }).remote.open;
      expect(open.max_frame_size).toBe(MAX_FRAME);
      expect(open.channel_max).toBe(255);
      expect(open.idle_time_out).toBe(60_000);
      expect([open.offered_capabilities].flat()).toContain("ANONYMOUS-RELAY");
      await c.close();
    });

    it("TLS: the same door over TLS", async () => {
      const c = await AmqpClient.open(gw.port("amqp_tls"), {
        transport: "tls",
        ca: [readFileSync(certs.ca)],
        servername: "localhost",
      } as never);
      const subject = unique("tls");
      const r = collect(await c.receiver(subject));
      nc.publish(subject, "secret");
      expect(bodyText((await r.next()).message)).toBe("secret");
      await c.close();
    });

    it("honours the client's idle timeout: the gateway's heartbeats keep a quiet connection open", async () => {
      const c = await AmqpClient.open(gw.port("amqp"), { idle_time_out: 200 });
      let lost = false;
      c.conn.once("disconnected", () => {
        lost = true;
      });
      // rhea closes a connection idle for twice its idle-time-out: three of those pass in silence.
      await new Promise((r) => setTimeout(r, 1_300));
      expect(lost).toBe(false);
      expect(c.conn.is_open()).toBe(true);
      await c.close();
    });

    it("closes a connection that sends no header within limits.connect_timeout", async () => {
      const s = raw(gw.port("amqp"));
      await s.closed();
    });
  });

  describe("protocol headers and frames (item 7)", () => {
    it.each([
      ["an HTTP request", Buffer.from("GET / HTTP/1.1\r\nHost: x\r\n\r\n")],
      ["AMQP 0-9-1", Buffer.from([0x41, 0x4d, 0x51, 0x50, 0, 0, 9, 1])],
      ["AMQP over in-band TLS", Buffer.from([0x41, 0x4d, 0x51, 0x50, 2, 1, 0, 0])],
    ])("answers %s with its own header (SASL, 1.0.0) and closes", async (_what, bytes) => {
      const s = raw(gw.port("amqp"));
      s.socket.write(bytes);
      await s.closed();
      expect(s.received().subarray(0, 8)).toEqual(Buffer.from([0x41, 0x4d, 0x51, 0x50, 3, 1, 0, 0]));
      await stillServing();
    });

    it("closes with framing-error a frame larger than max-frame-size, without buffering it", async () => {
      const c = await AmqpClient.open(gw.port("amqp"));
      const closed = c.closed();
      const header = Buffer.alloc(8);
      header.writeUInt32BE(0x40000000, 0); // a 1 GiB frame
      header.writeUInt8(2, 4);
      socketOf(c).write(header);
      socketOf(c).write(Buffer.alloc(64 * 1024));
      expect(await closed).toMatchObject({ condition: "amqp:connection:framing-error" });
      await stillServing();
    });

    it("closes with framing-error a frame on a channel above channel-max", async () => {
      const c = await AmqpClient.open(gw.port("amqp"));
      const closed = c.closed();
      socketOf(c).write(
        frames.write_frame({
          type: 0,
          channel: 300,
          performative: frames.begin({ next_outgoing_id: 0, incoming_window: 10, outgoing_window: 10 }),
        }),
      );
      expect(await closed).toMatchObject({ condition: "amqp:connection:framing-error" });
      await stillServing();
    });

    it("survives a frame that does not decode", async () => {
      const c = await AmqpClient.open(gw.port("amqp"));
      const frame = Buffer.from([0, 0, 0, 16, 2, 0, 0, 0, 0x00, 0x53, 0x99, 0xff, 0xff, 0xff, 0xff, 0xff]);
      const gone = c.closed();
      socketOf(c).write(frame);
      await gone;
      await stillServing();
    });
  });

  describe("credit and sizes (items 4 and 7)", () => {
    it("a message larger than one frame crosses both ways, in several frames", async () => {
      const c = await AmqpClient.open(gw.port("amqp"));
      const subject = unique("big");
      const r = collect(await c.receiver(subject));
      const got = nc.subscribe(subject, { max: 1 });
      const body = Buffer.alloc(30_000, 7);
      expect(await send(await c.sender(subject), { body: rhea.message.data_section(body) })).toEqual({
        state: "accepted",
      });
      for await (const m of got) expect(m.data.length).toBe(body.length);
      const { message } = await r.next();
      expect(Buffer.compare((message.body as { content: Buffer }).content, body)).toBe(0);
      await c.close();
    });

    it("detaches amqp:link:message-size-exceeded a message larger than NATS takes, and advertises the limit", async () => {
      const c = await AmqpClient.open(gw.port("amqp"));
      const sender = await c.sender(unique("too.big"));
      // What NATS takes less room for the gateway's headers (src/protocol/natsLimits.ts).
      expect((sender as unknown as { max_message_size: number }).max_message_size).toBe(MAX_PAYLOAD - HEADER_ROOM);
      const gone = detached(sender, "sender");
      sender.send({ body: rhea.message.data_section(Buffer.alloc(MAX_PAYLOAD * 2)) });
      expect(await gone).toMatchObject({ condition: "amqp:link:message-size-exceeded" });
      await c.close();
      await stillServing();
    });

    it("detaches amqp:link:transfer-limit-exceeded a sender that ignores credit", async () => {
      const c = await AmqpClient.open(gw.port("amqp"));
      const sender: Sender = await c.sender(unique("greedy"));
      await new Promise<void>((r) => (sender.sendable() ? r() : sender.once("sendable", () => r())));
      const credit = (sender as unknown as { credit: number }).credit;
      const gone = detached(sender, "sender");
      const internals = sender as unknown as {
        local: { handle: number };
        session: { local: { channel: number }; outgoing: { next_delivery_id: number } };
      };
      const payload = rhea.message.encode({ body: "unasked" });
      const burst: Buffer[] = [];
      for (let i = 0; i <= credit + 5; i++) {
        const id = internals.session.outgoing.next_delivery_id++;
        burst.push(
          frames.write_frame({
            type: 0,
            channel: internals.session.local.channel,
            performative: frames.transfer({
              handle: internals.local.handle,
              delivery_id: id,
              delivery_tag: Buffer.from(String(id)),
              message_format: 0,
              settled: true,
            }),
            payload,
          }),
        );
      }
      socketOf(c).write(Buffer.concat(burst));
      expect(await gone).toMatchObject({ condition: "amqp:link:transfer-limit-exceeded" });
      await c.close();
      await stillServing();
    });

    it("a receiver that never grants credit costs a bounded queue: the overflow is dropped and counted", async () => {
      const c = await AmqpClient.open(gw.port("amqp"));
      const subject = unique("stingy");
      const receiver = await c.receiver({ source: subject, credit_window: 0 });
      const before = await metric(gw, "mqgw_dropped_total", { protocol: "amqp", reason: "slow_consumer" });
      for (let i = 0; i < 3_000; i++) nc.publish(subject, String(i));
      await nc.flush();
      await eventually(
        async () =>
          (await metric(gw, "mqgw_dropped_total", { protocol: "amqp", reason: "slow_consumer" })) - before >= 2_000
            ? true
            : undefined,
        10_000,
        "2000 dropped",
      );
      const got = collect(receiver);
      receiver.add_credit(5);
      // The newest are kept: 2000 .. 2004.
      expect((await got.take(5)).map((m) => bodyText(m.message))).toEqual(["2000", "2001", "2002", "2003", "2004"]);
      await c.close();
      await stillServing();
    });

    it("an attach storm meets the per-connection link limit (resource-limit-exceeded)", async () => {
      const c = await AmqpClient.open(gw.port("amqp"));
      const links = await Promise.allSettled(
        Array.from({ length: 260 }, (_, i) => c.receiver({ source: `storm.${process.pid}.${i}`, snd_settle_mode: 1 })),
      );
      const refused = links.filter((l) => l.status === "rejected");
      expect(refused.length).toBe(4);
      expect((refused[0] as PromiseRejectedResult).reason).toMatchObject({ condition: "amqp:resource-limit-exceeded" });
      await c.close();
      await stillServing();
    });
  });
  it("logged no errors along the way", () => {
    expect(gw.logs.filter((l) => Number(l.level) >= 50)).toEqual([]);
  });
});
