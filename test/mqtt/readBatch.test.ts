import type { Duplex } from "node:stream";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SocketReads } from "../../src/actors/mqtt/readBatch.js";

/** A socket as the batch sees it: never paused. */
const socket = { isPaused: () => false, unshift: () => {} } as unknown as Duplex;

/** Sockets that each read some chunks and may close; what their readers heard, in one log. */
function sockets(plans: ReadonlyArray<{ chunks: number; closes: boolean }>, log: string[]) {
  return plans.map((plan, i) => {
    const reads = new SocketReads(socket, {
      onData: (chunk) => log.push(`${i}:${chunk.toString()}`),
      onClosed: () => log.push(`${i}:closed`),
    });
    return { plan, reads };
  });
}

const turn = () => new Promise<void>((r) => setImmediate(r));

describe("socket reads batched across connections", () => {
  it("every chunk reaches its reader once, in order, and a close after them", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ chunks: fc.integer({ min: 0, max: 3 }), closes: fc.boolean() }), {
          minLength: 1,
          maxLength: 1_500,
        }),
        async (plans) => {
          const log: string[] = [];
          for (const { plan, reads } of sockets(plans, log)) {
            for (let c = 0; c < plan.chunks; c++) reads.add(Buffer.from(String(c)));
            if (plan.closes) reads.closed();
          }
          while (log.length < plans.reduce((a, p) => a + p.chunks + (p.closes ? 1 : 0), 0)) await turn();
          plans.forEach((plan, i) => {
            const heard = log.filter((l) => l.startsWith(`${i}:`));
            const expected = Array.from({ length: plan.chunks }, (_, c) => `${i}:${c}`);
            expect(heard).toEqual(plan.closes ? [...expected, `${i}:closed`] : expected);
          });
        },
      ),
      { numRuns: 30 },
    );
  });

  // A mass drop or reconnect is thousands of sockets in one turn: handled all at once, it
  // held off timers, JetStream's answers and pulls' ends for seconds.
  it("a turn takes at most 512 connections; what else waits for the event loop runs between", async () => {
    const log: string[] = [];
    const all = sockets(
      Array.from({ length: 1_300 }, () => ({ chunks: 1, closes: true })),
      log,
    );
    for (const { reads } of all) reads.add(Buffer.from("0"));
    for (const { reads } of all) reads.closed();
    setImmediate(() => log.push("other work"));
    while (log.filter((l) => l.endsWith(":closed")).length < all.length) await turn();
    const other = log.indexOf("other work");
    const before = log.slice(0, other).filter((l) => l.endsWith(":0")).length;
    expect(before).toBe(512);
    expect(log.filter((l) => l.endsWith(":0"))).toHaveLength(1_300);
  });
});
