// When a gateway keeps an index of a sessions bucket (protocol/indexDemand.ts): examples at
// the thresholds, and properties of the sliding minute over random event sequences.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { INDEX_DEMAND, IndexDemand } from "../../src/protocol/indexDemand.js";

const W = INDEX_DEMAND.windowMs;

/** A demand fed `cleanStarts` and `writes` at time 0. */
function fed(cleanStarts: number, writes: number): IndexDemand {
  const d = new IndexDemand(0);
  for (let i = 0; i < cleanStarts; i++) d.cleanStart(0);
  for (let i = 0; i < writes; i++) d.write(0);
  return d;
}

describe("IndexDemand", () => {
  it.each([
    // cleanStarts, writes, worth following, worth dropping
    [0, 0, false, false],
    [15, 0, false, false],
    [16, 0, true, false],
    [16, 256, true, false],
    [16, 257, false, false],
    [16, 1024, false, false],
    [16, 1025, false, true],
    [1, 65, false, true],
    [1, 10_000, false, true],
  ])("%i clean starts and %i writes in a minute: following %s, dropping %s", (c, w, follow, drop) => {
    const d = fed(c, w);
    expect(d.worthFollowing(1)).toBe(follow);
    expect(d.worthDropping(1)).toBe(drop);
  });

  it("what happened two windows ago counts for nothing; one window ago, for the share still inside", () => {
    const d = fed(32, 0);
    expect(d.rates(W).cleanStarts).toBe(32);
    expect(d.rates(W + W / 4).cleanStarts).toBeCloseTo(24);
    expect(d.worthFollowing(2 * W)).toBe(false);
    expect(d.rates(5 * W)).toEqual({ cleanStarts: 0, writes: 0 });
  });

  const events = fc.array(
    fc.record({ at: fc.integer({ min: 0, max: 5 * W }), kind: fc.constantFrom("clean", "write") }),
    { maxLength: 300 },
  );

  it("rates are never negative and never more than what happened in the last two windows", () => {
    fc.assert(
      fc.property(events, fc.integer({ min: 0, max: W }), (list, after) => {
        const sorted = [...list].sort((a, b) => a.at - b.at);
        const d = new IndexDemand(0);
        for (const e of sorted) (e.kind === "clean" ? d.cleanStart : d.write).call(d, e.at);
        const now = (sorted.at(-1)?.at ?? 0) + after;
        const { cleanStarts, writes } = d.rates(now);
        const recent = (kind: string) => sorted.filter((e) => e.kind === kind && e.at > now - 2 * W).length;
        expect(cleanStarts).toBeGreaterThanOrEqual(0);
        expect(writes).toBeGreaterThanOrEqual(0);
        expect(cleanStarts).toBeLessThanOrEqual(recent("clean"));
        expect(writes).toBeLessThanOrEqual(recent("write"));
        // What happens now counts in full.
        d.cleanStart(now);
        d.cleanStart(now);
        expect(d.rates(now).cleanStarts).toBeCloseTo(cleanStarts + 2);
      }),
    );
  });

  it("never worth following and dropping at once; another clean start never makes it less worth following", () => {
    fc.assert(
      fc.property(events, (list) => {
        const sorted = [...list].sort((a, b) => a.at - b.at);
        const d = new IndexDemand(0);
        for (const e of sorted) (e.kind === "clean" ? d.cleanStart : d.write).call(d, e.at);
        const now = sorted.at(-1)?.at ?? 0;
        const follow = d.worthFollowing(now);
        expect(follow && d.worthDropping(now)).toBe(false);
        d.cleanStart(now);
        if (follow) expect(d.worthFollowing(now)).toBe(true);
      }),
    );
  });
});
