// The publish quotas' token buckets (src/protocol/tokenBucket.ts): what any schedule of
// requests gets, never more than rate * t + burst over any window, and what a refill gives.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { admitPublish, type BucketRate, TokenBucket } from "../../src/protocol/tokenBucket.js";

const RUNS = { numRuns: 2000 };
// Floating point: a refill of rate * ms / 1000 may be off in the last bits.
const EPS = 1e-6;

const limit = fc.record({
  rate: fc.double({ min: 0.1, max: 10_000, noNaN: true }),
  burst: fc.integer({ min: 1, max: 1_000 }),
});
/** Requests: a gap in ms since the one before, and how many tokens it asks for. */
const schedule = fc.array(
  fc.record({ gap: fc.double({ min: 0, max: 2_000, noNaN: true }), n: fc.integer({ min: 1, max: 50 }) }),
  { maxLength: 200 },
);

function run(l: BucketRate, requests: Array<{ gap: number; n: number }>) {
  const bucket = new TokenBucket(l, 0);
  let now = 0;
  return requests.map(({ gap, n }) => {
    now += gap;
    const admitted = bucket.has(n, now);
    if (admitted) bucket.take(n);
    return { at: now, n: admitted ? n : 0 };
  });
}

describe("a token bucket", () => {
  it("never admits more than rate * t + burst over any window", () => {
    fc.assert(
      fc.property(limit, schedule, (l, requests) => {
        const got = run(l, requests);
        for (let i = 0; i < got.length; i++) {
          let sum = 0;
          for (let j = i; j < got.length; j++) {
            sum += got[j]!.n;
            const window = (got[j]!.at - got[i]!.at) / 1000;
            expect(sum).toBeLessThanOrEqual(l.rate * window + l.burst + EPS);
          }
        }
      }),
      RUNS,
    );
  });

  it("admits the whole burst at once after a quiet spell, then one more per 1/rate seconds", () => {
    fc.assert(
      fc.property(limit, fc.integer({ min: 1, max: 20 }), (l, k) => {
        const b = new TokenBucket(l, 0);
        expect(b.has(l.burst, 0)).toBe(true);
        b.take(l.burst);
        expect(b.has(1, 0)).toBe(false);
        // k tokens are earned after k / rate seconds (up to the burst), not before.
        const earned = Math.min(k, l.burst);
        const at = (earned * 1000) / l.rate;
        expect(b.has(earned, at * (1 - 1e-9) - 1e-6)).toBe(false);
        expect(b.has(earned, at + 1e-6)).toBe(true);
        // A long quiet spell fills it to the burst, not past it.
        expect(b.has(l.burst, at + 1e9)).toBe(true);
        expect(b.has(l.burst + 1, at + 1e9)).toBe(false);
        expect(b.full(at + 1e9)).toBe(true);
      }),
      RUNS,
    );
  });

  it("a refused request takes nothing", () => {
    const b = new TokenBucket({ rate: 1, burst: 3 }, 0);
    expect(b.has(4, 0)).toBe(false);
    expect(b.has(3, 0)).toBe(true);
  });

  it("rate 0 is no limit", () => {
    const b = new TokenBucket({ rate: 0, burst: 0 }, 0);
    for (let i = 0; i < 1000; i++) {
      expect(b.has(1_000_000, 0)).toBe(true);
      b.take(1_000_000);
    }
    expect(b.full(0)).toBe(true);
  });

  it("after a reconfigure the new rate and burst bound every window that starts there", () => {
    fc.assert(
      fc.property(limit, limit, schedule, schedule, (before, after, first, second) => {
        const b = new TokenBucket(before, 0);
        let now = 0;
        const step = ({ gap, n }: { gap: number; n: number }) => {
          now += gap;
          const ok = b.has(n, now);
          if (ok) b.take(n);
          return { at: now, n: ok ? n : 0 };
        };
        first.forEach(step);
        const start = now;
        b.reconfigure(after, now);
        let sum = 0;
        for (const r of second) {
          sum += step(r).n;
          expect(sum).toBeLessThanOrEqual((after.rate * (now - start)) / 1000 + after.burst + EPS);
        }
      }),
      RUNS,
    );
  });

  it("a limit turned on by a reconfigure starts full; a client over its old limit stays over", () => {
    const open = new TokenBucket({ rate: 0, burst: 0 }, 0);
    open.reconfigure({ rate: 1, burst: 5 }, 10);
    expect(open.has(5, 10)).toBe(true);
    expect(open.has(6, 10)).toBe(false);
    const spent = new TokenBucket({ rate: 100, burst: 100 }, 0);
    spent.take(100);
    spent.reconfigure({ rate: 1, burst: 1_000 }, 0);
    expect(spent.has(1, 0)).toBe(false);
    expect(spent.has(1, 1_000)).toBe(true);
  });
});

describe("one publish against the client's and the account's quotas", () => {
  const buckets = (messages: BucketRate, bytes: BucketRate) => ({
    messages: new TokenBucket(messages, 0),
    bytes: new TokenBucket(bytes, 0),
  });
  const none = { rate: 0, burst: 0 };

  it("is admitted only when all four buckets have room, and a refusal costs no bucket anything", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 300 }), { maxLength: 100 }),
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 100, max: 2_000 }),
        (sizes, accountMessages, clientBytes) => {
          const client = buckets(none, { rate: 1, burst: clientBytes });
          const account = buckets({ rate: 1, burst: accountMessages }, none);
          let messages = 0;
          let bytes = 0;
          for (const size of sizes) {
            const scope = admitPublish(client, account, size, 0);
            if (scope === undefined) {
              messages++;
              bytes += size;
            } else if (scope === "client") expect(bytes + size).toBeGreaterThan(clientBytes);
            else expect(messages).toBe(accountMessages);
          }
          expect(messages).toBeLessThanOrEqual(accountMessages);
          expect(bytes).toBeLessThanOrEqual(clientBytes);
        },
      ),
      RUNS,
    );
  });

  it("the client's quota is asked first: the account's tokens stay for its other clients", () => {
    const account = buckets({ rate: 1, burst: 10 }, none);
    const greedy = buckets({ rate: 1, burst: 2 }, none);
    const other = buckets(none, none);
    const scopes = Array.from({ length: 5 }, () => admitPublish(greedy, account, 1, 0));
    expect(scopes).toEqual([undefined, undefined, "client", "client", "client"]);
    const others = Array.from({ length: 9 }, () => admitPublish(other, account, 1, 0));
    expect(others.filter((s) => s === undefined)).toHaveLength(8);
    expect(others.at(-1)).toBe("account");
  });
});
