import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hasHome, homeWorker } from "../../src/protocol/homeWorker.js";

describe("homeWorker: the worker a client id's session lives on", () => {
  it("is one of the workers, and the same answer every time", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 64 }), fc.integer({ min: 1, max: 1024 }), (id, n) => {
        const k = homeWorker(id, n);
        expect(Number.isInteger(k) && k >= 1 && k <= n).toBe(true);
        expect(homeWorker(id, n)).toBe(k);
      }),
      { numRuns: 5000 },
    );
  });

  it("is worker 1 when there is one", () => {
    fc.assert(fc.property(fc.string(), (id) => homeWorker(id, 1) === 1));
  });

  it("spreads a fleet's ids (dev/<i>, random ones) evenly: each worker within a fifth of its share", () => {
    const fleets = [
      Array.from({ length: 20_000 }, (_, i) => `dev-${i}`),
      fc.sample(fc.uuid(), { numRuns: 20_000, seed: 42 }),
    ];
    for (const ids of fleets) {
      for (const n of [2, 3, 4, 8, 16]) {
        const counts = new Array<number>(n).fill(0);
        for (const id of ids) counts[homeWorker(id, n) - 1]! += 1;
        const share = ids.length / n;
        for (const c of counts) expect(Math.abs(c - share)).toBeLessThan(share / 5);
      }
    }
  });

  it("seeds: fixed answers, so workers of different builds agree", () => {
    // Pinned: a change of the function would move every session of a running group at an
    // upgrade that restarts the workers one by one. FNV-1a("a") is 0xe40c292c.
    expect(homeWorker("a", 1 << 30)).toBe((0xe40c292c % (1 << 30)) + 1);
    expect([homeWorker("a", 2), homeWorker("dev-1", 4), homeWorker("sensor/17", 8), homeWorker("", 3)]).toEqual([
      1, 3, 1, 2,
    ]);
    expect(["dev-0", "dev-1", "dev-2", "dev-3"].map((id) => homeWorker(id, 2))).toEqual([2, 1, 2, 1]);
  });
});

describe("hasHome: which sessions are served on their home worker", () => {
  it("those that resume or outlive their connection, with a client id of their own", () => {
    const table: Array<[string, boolean, number, boolean]> = [
      ["d1", false, 0, true], // 3.1.1 clean session 0, v5 clean start 0 without expiry: resumes
      ["d1", false, 3600, true],
      ["d1", true, 3600, true], // a new session that will be resumed
      ["d1", true, 0, false], // a clean session: ends with its connection
      ["", false, 0, false], // no client id: one is assigned, never asked for again
      ["", true, 60, false],
    ];
    for (const [clientId, cleanStart, sessionExpirySec, expected] of table)
      expect(hasHome({ clientId, cleanStart, sessionExpirySec })).toBe(expected);
  });
});
