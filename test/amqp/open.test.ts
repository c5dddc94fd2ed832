// Issue 4, item 1: what the open sets, honoured both ways. The gateway's idle-time-out
// (amqp.idle_timeout) closes a silent connection; the client's max-frame-size bounds the
// frames the gateway sends; channel-max bounds the sessions. hostile.test.ts has the
// rest: what is advertised, the client's idle-time-out, frames over max-frame-size.
import { createRequire } from "node:module";
import { connect as tcpConnect } from "node:net";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { Session } from "rhea";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { AmqpClient, bodyText, collect, send } from "./rheaClient.js";

const require = createRequire(import.meta.url);
type Frame = {
  size: number;
  type?: number;
  channel?: number;
  performative?: Record<string, unknown> & object;
  /** When the test read it (ms). */
  at?: number;
};
const frames = require("rhea/lib/frames.js") as {
  write_frame(f: unknown): Buffer;
  open(fields: Record<string, unknown>): unknown;
  read_frame(b: Buffer): Frame | null;
};

const IDLE_MS = 1_000;
let n = 0;
const unique = (prefix: string) => `${prefix}.${process.pid}x${++n}`;

/** Every frame this process's rhea reads (the clients'), as it reads it. */
const readFrames: Frame[] = [];
const readFrame = frames.read_frame;
frames.read_frame = (b: Buffer) => {
  const f = readFrame(b);
  if (f) readFrames.push(f);
  return f;
};

describe("the open, honoured (item 1)", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false });
    gw = await startGateway({
      nats: nats.url,
      config: { amqp: { listen: "127.0.0.1:0", idle_timeout: `${IDLE_MS}ms` } },
    });
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("amqp.idle_timeout: advertised; a silent connection is closed amqp:resource-limit-exceeded, one that heartbeats stays", async () => {
    const talking = await AmqpClient.open(gw.port("amqp"));
    const advertised = (talking.conn as unknown as { remote: { open: { idle_time_out: number } } }).remote.open;
    expect(advertised.idle_time_out).toBe(IDLE_MS);

    // A client that opens (no SASL layer: ANONYMOUS is offered) and then says nothing.
    const silent = tcpConnect(gw.port("amqp"), "127.0.0.1");
    let received = Buffer.alloc(0);
    const seen: Frame[] = [];
    silent.on("error", () => {});
    silent.on("data", (d: Buffer) => {
      received = Buffer.concat([received, d]);
      for (;;) {
        if (received.length >= 8 && received.subarray(0, 4).toString() === "AMQP") {
          received = received.subarray(8);
          continue;
        }
        const f = received.length >= 8 ? readFrame(received) : null;
        if (!f) break;
        received = received.subarray(f.size);
        seen.push({ ...f, at: Date.now() });
      }
    });
    const closed = new Promise<number>((r) => silent.on("close", () => r(Date.now())));
    const start = Date.now();
    silent.write(Buffer.from([0x41, 0x4d, 0x51, 0x50, 0, 1, 0, 0]));
    silent.write(frames.write_frame({ type: 0, channel: 0, performative: frames.open({ container_id: "silent" }) }));
    const end = await closed;
    const close = seen.find((f) => f.performative && "error" in f.performative && !("container_id" in f.performative));
    expect(close?.performative?.error).toMatchObject({ condition: "amqp:resource-limit-exceeded" });
    // The close comes after the idle-time-out (rhea's own watchdog would wait twice as long);
    // a client that does not answer it is cut off after the 2 s close grace.
    expect(close!.at! - start).toBeGreaterThanOrEqual(IDLE_MS - 100);
    expect(close!.at! - start).toBeLessThan(IDLE_MS * 2);
    expect(end).toBeGreaterThanOrEqual(close!.at!);

    // The client that heartbeats (rhea: empty frames at half the idle-time-out) was open all along.
    expect(talking.conn.is_open()).toBe(true);
    const subject = unique("idle.alive");
    const r = collect(await talking.receiver(subject));
    expect(await send(await talking.sender(subject), { body: "still here" })).toEqual({ state: "accepted" });
    expect(bodyText((await r.next()).message)).toBe("still here");
    await talking.close();
  });

  it("the client's max-frame-size: a message to it arrives in frames no larger", async () => {
    const c = await AmqpClient.open(gw.port("amqp"), { max_frame_size: 512 });
    const subject = unique("small.frames");
    const r = collect(await c.receiver(subject));
    const from = readFrames.length;
    const body = Buffer.alloc(5_000, 0x64);
    nc.publish(subject, body);
    const { message } = await r.next();
    expect(Buffer.compare((message.body as { content: Buffer }).content, body)).toBe(0);
    const transfers = readFrames.slice(from).filter((f) => f.performative && "delivery_id" in f.performative);
    expect(transfers.length).toBeGreaterThanOrEqual(10);
    for (const f of transfers) expect(f.size).toBeLessThanOrEqual(512);
    await c.close();
  });

  it("channel-max 255: sessions on channels 0 to 255 are served, one on channel 256 closes the connection with framing-error", async () => {
    const c = await AmqpClient.open(gw.port("amqp"));
    const sessions: Session[] = [];
    for (let ch = 0; ch <= 255; ch++) {
      const s = c.conn.create_session();
      s.begin();
      sessions.push(s);
    }
    await eventually(() => (sessions.every((s) => s.is_open()) ? true : undefined));
    // The last one works: a link on channel 255.
    const last = sessions[255]! as unknown as {
      local: { channel: number };
      open_sender(t: string): { is_open(): boolean };
    };
    expect(last.local.channel).toBe(255);
    const link = last.open_sender(unique("channel.255"));
    await eventually(() => (link.is_open() ? true : undefined));
    const closed = c.closed();
    const over = c.conn.create_session() as unknown as { local: { channel: number }; begin(): void };
    over.begin();
    expect(over.local.channel).toBe(256);
    expect(await closed).toMatchObject({ condition: "amqp:connection:framing-error" });
  });
});
