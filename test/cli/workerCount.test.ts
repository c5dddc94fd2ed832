import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_WORKERS, workerCount } from "../../src/cli/workerCount.js";

describe("--workers", () => {
  it("is one process without the flag, one per core for 0 and auto, else the count asked", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 256 }), fc.integer({ min: 1, max: MAX_WORKERS }), (cores, n) => {
        expect(workerCount(undefined, cores)).toEqual({ ok: true, count: 1 });
        expect(workerCount("0", cores)).toEqual({ ok: true, count: cores });
        expect(workerCount("AUTO", cores)).toEqual({ ok: true, count: cores });
        expect(workerCount(String(n), cores)).toEqual({ ok: true, count: n });
      }),
    );
  });

  it("refuses anything else, naming the flag and the value", () => {
    const bad = fc.oneof(
      fc.string().filter((s) => !/^\s*(\d+|auto)\s*$/i.test(s)),
      fc.integer({ min: MAX_WORKERS + 1 }).map(String),
      fc.integer({ max: -1 }).map(String),
    );
    fc.assert(
      fc.property(bad, (value) => {
        const r = workerCount(value, 4);
        expect(r.ok).toBe(false);
        if (!r.ok) expect(r.error).toContain(`--workers: must be a whole number from 0 to ${MAX_WORKERS}, or auto`);
        if (!r.ok) expect(r.error).toContain(JSON.stringify(value));
      }),
    );
  });
});
