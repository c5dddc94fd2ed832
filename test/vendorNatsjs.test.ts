// The nats.js patch of src/vendor/natsjs.ts (issue 16): protocol lines made bytes with
// Buffer.from instead of TextEncoder must queue the very bytes nats.js queued before; what is
// queued in one turn of the event loop goes out in one write (a saturated loop's at a 1 ms
// timer), and nothing queued is lost when the connection closes (issue 24); and a request
// answered makes no Error nats.js throws away, while unanswered ones reject as before.

import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { DataBuffer, ProtocolHandler } from "@nats-io/nats-core/internal";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loopBusyShare } from "../src/vendor/loopBusy.js";
import { installNatsPatches, SATURATED, upstream } from "../src/vendor/natsjs.js";
import { type NatsServerHandle, startNatsServer } from "./helpers/natsServer.js";

type Send = (this: unknown, cmd: string | Uint8Array, ...payloads: Uint8Array[]) => void;

/** What a ProtocolHandler's sendCommand queues for `cmd` and `payloads`, with no connection behind it. */
function queued(send: Send, cmd: string, payloads: Uint8Array[]): Uint8Array {
  const handler = { outbound: new DataBuffer(), pendingLimit: Number.MAX_SAFE_INTEGER, flushPending() {} };
  send.call(handler, cmd, ...payloads);
  return handler.outbound.drain();
}

describe("nats.js protocol lines as Buffer.from bytes", () => {
  it("queues the bytes nats.js's own sendCommand queues, for any line (lone surrogates included)", () => {
    installNatsPatches();
    const patched = (ProtocolHandler.prototype as unknown as { sendCommand: Send }).sendCommand;
    const original = upstream["@nats-io/nats-core ProtocolHandler.sendCommand"] as Send;
    expect(patched).not.toBe(original);
    fc.assert(
      // Code units, not code points: lone surrogates come too (both encoders write U+FFFD).
      fc.property(
        fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)) }),
        fc.array(fc.uint8Array({ maxLength: 8 }), { maxLength: 3 }),
        (subject, payloads) => {
          const line = `HPUB ${subject} 12 34\r\n`;
          expect(Buffer.from(queued(patched, line, payloads))).toEqual(Buffer.from(queued(original, line, payloads)));
        },
      ),
    );
  });
});

/** A reading of loopBusyShare that covers the last `ms` (its window is ~10 ms), the loop idle meanwhile. */
async function idleLoop(ms = 100): Promise<void> {
  await new Promise((r) => setTimeout(r, 11));
  loopBusyShare();
  await new Promise((r) => setTimeout(r, ms));
}

/** A reading of loopBusyShare that covers the last `ms`, the loop running one callback meanwhile. */
async function busyLoop(ms = 40): Promise<void> {
  await new Promise((r) => setTimeout(r, 11));
  loopBusyShare();
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // spinning: the loop runs this callback, not waiting for I/O
  }
}

describe("the event loop's busy share (loopBusy.ts)", () => {
  // What the writes hang on is which side of SATURATED a reading falls. A loop waiting for
  // I/O still runs the test runner's own callbacks (a CI run read 0.53 over 40 ms beside
  // other test files), so it waits long enough for those to be a small part of it.
  it("below the saturation mark after waiting for I/O, above it after running a callback, within 0..1", async () => {
    await idleLoop(200);
    const idle = loopBusyShare();
    await busyLoop();
    const busy = loopBusyShare();
    expect(idle).toBeGreaterThanOrEqual(0);
    expect(idle).toBeLessThan(SATURATED);
    expect(busy).toBeGreaterThanOrEqual(SATURATED);
    expect(busy).toBeLessThanOrEqual(1);
  });
});

describe("nats.js commands written once per turn of the event loop", () => {
  /** A ProtocolHandler's queue with no connection behind it, counting the writes it makes. */
  function countingHandler() {
    const handler = {
      writes: 0,
      outbound: new DataBuffer(),
      pendingLimit: Number.MAX_SAFE_INTEGER,
      flushPending() {
        if (handler.outbound.size() === 0) return;
        handler.outbound.drain();
        handler.writes++;
      },
    };
    return handler;
  }

  /** How many writes `send` makes of commands queued from three callbacks of one turn (microtasks between). */
  async function writesOf(send: Send): Promise<number> {
    const handler = countingHandler();
    for (const line of ["PUB a 1\r\n", "PUB b 1\r\n", "PUB c 1\r\n"]) {
      send.call(handler, line, new Uint8Array([1]));
      await Promise.resolve();
    }
    await new Promise((r) => setImmediate(r));
    return handler.writes;
  }

  it("queues a turn's commands into one write, where nats.js writes once per callback", async () => {
    installNatsPatches();
    await idleLoop();
    const patched = (ProtocolHandler.prototype as unknown as { sendCommand: Send }).sendCommand;
    expect(await writesOf(upstream["@nats-io/nats-core ProtocolHandler.sendCommand"] as Send)).toBe(3);
    expect(await writesOf(patched)).toBe(1);
  });

  it("on a saturated loop, writes at a 1 ms timer, with what later turns queued meanwhile", async () => {
    installNatsPatches();
    const patched = (ProtocolHandler.prototype as unknown as { sendCommand: Send }).sendCommand;
    const handler = countingHandler();
    await busyLoop();
    patched.call(handler, "PUB a 1\r\n", new Uint8Array([1]));
    // The end of this turn: an idle loop writes here (its setImmediate ran before this one).
    await new Promise((r) => setImmediate(r));
    expect(handler.writes).toBe(0);
    patched.call(handler, "PUB b 1\r\n", new Uint8Array([1]));
    await new Promise((r) => setTimeout(r, 5));
    expect(handler.writes).toBe(1);
    expect(handler.outbound.size()).toBe(0);
  });

  /** The writes of a PUB and then a PING (`flush`) asked in one callback, and what each write held. */
  function writesOfPubAndPing(flush: (this: unknown) => Promise<void>): string[] {
    const writes: string[] = [];
    const handler = {
      outbound: new DataBuffer(),
      pendingLimit: Number.MAX_SAFE_INTEGER,
      pongs: [] as unknown[],
      flushPending() {
        if (handler.outbound.size() > 0) writes.push(Buffer.from(handler.outbound.drain()).toString());
      },
      sendCommand: (ProtocolHandler.prototype as unknown as { sendCommand: Send }).sendCommand,
    };
    handler.sendCommand.call(handler, "PUB a 1\r\n", new Uint8Array([49]), new TextEncoder().encode("\r\n"));
    void flush.call(handler).catch(() => {});
    return writes;
  }

  it("queues a PING behind the turn's commands and writes both at once, where nats.js wrote the queue at the PING", async () => {
    installNatsPatches();
    const patched = (ProtocolHandler.prototype as unknown as { flush: (this: unknown) => Promise<void> }).flush;
    const original = upstream["@nats-io/nats-core ProtocolHandler.flush"] as (this: unknown) => Promise<void>;
    expect(patched).not.toBe(original);
    // nats.js: the PING wrote everything queued at once, and the turn's later commands again.
    expect(writesOfPubAndPing(original)).toEqual(["PUB a 1\r\n1\r\nPING\r\n"]);
    await idleLoop();
    // Patched: nothing yet (the rest of the turn may add to it), then one write, the PING last.
    const writes = writesOfPubAndPing(patched);
    expect(writes).toEqual([]);
    await new Promise((r) => setImmediate(r));
    expect(writes).toEqual(["PUB a 1\r\n1\r\nPING\r\n"]);
  });

  it("a flush resolves once what was published before it reached the server, over a real connection", async () => {
    installNatsPatches();
    const server = await startNatsServer();
    const nc = await connect({ servers: server.url });
    const got: string[] = [];
    nc.subscribe("seen.>", { callback: (_e, m) => got.push(m.subject) });
    try {
      for (let i = 0; i < 20; i++) {
        nc.publish(`seen.${i}`, "x");
        await nc.flush();
        // The server answered the PING after routing the publish back to this connection's own subscription.
        expect(got).toContain(`seen.${i}`);
      }
    } finally {
      await nc.close();
      await server.stop();
    }
  });

  it("writes what was queued when the connection closes right after", async () => {
    installNatsPatches();
    const server = await startNatsServer();
    const listener = await connect({ servers: server.url });
    const got: string[] = [];
    listener.subscribe("last.>", { callback: (_e, m) => got.push(m.subject) });
    await listener.flush();
    try {
      for (let i = 0; i < 20; i++) {
        const nc = await connect({ servers: server.url });
        nc.publish(`last.${i}`, "x");
        await nc.close();
      }
      await listener.flush();
      await expect.poll(() => got.length).toBe(20);
    } finally {
      await listener.close();
      await server.stop();
    }
  });
});

describe("nats.js requests settled without a thrown-away error", () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  beforeAll(async () => {
    installNatsPatches();
    server = await startNatsServer();
    nc = await connect({ servers: server.url, noAsyncTraces: true }); // as the gateway connects
    nc.subscribe("echo", { callback: (_e, m) => m.respond(m.data) });
    await nc.flush();
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  /** nats.js's RequestErrors made while `fn` runs (its request.js reads the class off errors.js's exports at each use). */
  async function requestErrorsMadeBy(fn: () => Promise<unknown>): Promise<number> {
    const errorsModule = createRequire(import.meta.url)(
      join(dirname(createRequire(import.meta.url).resolve("@nats-io/nats-core")), "errors.js"),
    ) as { RequestError: new (...a: never[]) => Error };
    const Original = errorsModule.RequestError;
    let made = 0;
    errorsModule.RequestError = class extends Original {
      constructor(...a: never[]) {
        super(...a);
        made++;
      }
    };
    try {
      await fn();
    } finally {
      errorsModule.RequestError = Original;
    }
    return made;
  }

  it("answers as before and makes no Error for an answered request", async () => {
    const made = await requestErrorsMadeBy(async () => {
      for (let i = 0; i < 50; i++)
        expect(new TextDecoder().decode((await nc.request("echo", `m${i}`)).data)).toBe(`m${i}`);
    });
    expect(made).toBe(0);
  });

  it("still rejects a request nobody answers, and one that times out", async () => {
    await expect(nc.request("nobody.here", "x")).rejects.toThrow(/no responders/i);
    nc.subscribe("silent", { callback: () => {} });
    await nc.flush();
    await expect(nc.request("silent", "x", { timeout: 50 })).rejects.toThrow(/timeout/i);
  });
});
