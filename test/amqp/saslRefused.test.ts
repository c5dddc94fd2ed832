// Issue 4, items 1 and 7: a SASL login refused before it reaches NATS (a malformed PLAIN
// response, a mechanism that was not offered) is answered with SASL's `auth` outcome, and
// a raw client that ignores it and stays silent is cut off after the same short grace as
// one NATS refused, not at limits.connect_timeout (set long here, 30 s).
import { createRequire } from "node:module";
import { connect as tcpConnect } from "node:net";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { AmqpClient, send } from "./rheaClient.js";

const frames = createRequire(import.meta.url)("rhea/lib/frames.js") as {
  write_frame(f: unknown): Buffer;
  sasl_frame(p: unknown): unknown;
  sasl_init(fields: Record<string, unknown>): unknown;
  read_frame(b: Buffer): { size: number; performative?: Record<string, unknown> } | null;
};

const SERVER = `
accounts { A { users: [ { user: "mqg-a", password: "gw-pw" }, { user: "alice", password: "alice-pw" } ] } }
`;

/** Well under limits.connect_timeout (30 s): the grace after a refusal is 2 s. */
const CUT_OFF_MS = 10_000;

interface Refusal {
  outcome: number;
  /** From the SASL outcome to the gateway closing the socket. */
  closedAfterMs: number;
}

/**
 * Sends the SASL header and `init`, reads the outcome, then stays silent (the socket
 * stays open for writing) until the gateway closes it. Rejects when the close does not
 * come within CUT_OFF_MS of the outcome.
 */
function refusedAndSilent(port: number, init: Record<string, unknown>): Promise<Refusal> {
  const socket = tcpConnect(port, "127.0.0.1");
  let buffer = Buffer.alloc(0);
  let outcome: number | undefined;
  let outcomeAt = 0;
  return new Promise((resolve, reject) => {
    // A bound, not a wait: resolves on the socket's close event.
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`not closed within ${CUT_OFF_MS} ms (outcome ${outcome})`));
    }, CUT_OFF_MS);
    socket.on("error", () => {});
    socket.on("close", () => {
      clearTimeout(timer);
      if (outcome === undefined) reject(new Error("closed before the SASL outcome"));
      else resolve({ outcome, closedAfterMs: Date.now() - outcomeAt });
    });
    socket.on("data", (d: Buffer) => {
      buffer = Buffer.concat([buffer, d]);
      if (buffer.length >= 8 && buffer.subarray(0, 4).toString() === "AMQP") buffer = buffer.subarray(8);
      for (;;) {
        const frame = buffer.length >= 8 ? frames.read_frame(buffer) : null;
        if (!frame) break;
        buffer = buffer.subarray(frame.size);
        const p = frame.performative ?? {};
        if ("code" in p && outcome === undefined) {
          outcome = Number(p.code);
          outcomeAt = Date.now();
        }
      }
    });
    socket.write(Buffer.from([0x41, 0x4d, 0x51, 0x50, 3, 1, 0, 0]));
    socket.write(frames.write_frame(frames.sasl_frame(frames.sasl_init(init))));
  });
}

describe("SASL refused before NATS: the client is cut off after the grace, not at connect_timeout", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false, config: SERVER });
    gw = await startGateway({
      nats: nats.url,
      config: {
        gateway_users: { A: { user: "mqg-a", password: "gw-pw" } },
        amqp: { listen: "127.0.0.1:0", sasl: ["PLAIN"] },
        limits: { connect_timeout: "30s" },
      },
    });
    nc = await connect({ servers: nats.url, user: "alice", pass: "alice-pw" });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it.each([
    ["a PLAIN response without its NUL separators", { mechanism: "PLAIN", initial_response: Buffer.from("alice") }],
    ["a PLAIN response with three NULs", { mechanism: "PLAIN", initial_response: Buffer.from("\0a\0b\0c") }],
    ["a PLAIN init without a response", { mechanism: "PLAIN" }],
    ["EXTERNAL, not offered on the plain listener", { mechanism: "EXTERNAL" }],
    ["ANONYMOUS, not in amqp.sasl", { mechanism: "ANONYMOUS" }],
    // rhea's default mechanisms object has this name on its prototype.
    ["a mechanism named after an rhea internal", { mechanism: "enable_plain" }],
  ])("%s: auth outcome, closed after the grace", async (_what, init) => {
    const r = await refusedAndSilent(gw.port("amqp"), init);
    expect(r.outcome).toBe(1);
    expect(r.closedAfterMs).toBeLessThan(CUT_OFF_MS);
  });

  it("a good login still works, end to end with NATS, and nothing was logged as an error", async () => {
    const subject = `sasl.ok.${process.pid}`;
    const c = await AmqpClient.open(gw.port("amqp"), { username: "alice", password: "alice-pw" });
    const sub = nc.subscribe(subject, { max: 1 });
    await nc.flush();
    expect(await send(await c.sender(subject), { body: "hi" })).toEqual({ state: "accepted" });
    for await (const m of sub) expect(m.string()).toContain("hi");
    await c.close();
    expect(gw.logs.filter((l) => Number(l.level) >= 50)).toEqual([]);
    expect(gw.logs.some((l) => l.msg === "AMQP login refused before NATS")).toBe(true);
  });
});
