import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type KeepaliveWatched, KeepaliveWheel } from "../../src/actors/mqtt/keepaliveWheel.js";

/** A connection as the wheel sees it, on a clock the test moves. */
function client(lastActivity: number, keepaliveLimitMs: number) {
  const c = { lastActivity, keepaliveLimitMs, keepaliveSlot: 0, expiredAt: -1, keepaliveExpired: () => {} };
  return c;
}

describe("keep-alive wheel (one clock for every MQTT connection)", () => {
  it("expires a silent connection no earlier than its limit and at most one tick later; activity postpones it", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5_000 }),
        fc.array(fc.integer({ min: 1, max: 3_000 }), { maxLength: 5 }),
        fc.integer({ min: 10, max: 500 }),
        (limit, gaps, tickMs) => {
          let now = 1_000_000;
          const wheel = new KeepaliveWheel(tickMs, () => now);
          const c: KeepaliveWatched & { expiredAt: number } = client(now, limit);
          c.keepaliveExpired = () => {
            c.expiredAt = now;
            wheel.unwatch(c);
          };
          wheel.watch(c);
          // Packets arrive after each gap (while it is still alive), then silence.
          for (const gap of gaps) {
            const until = now + gap;
            while (now < until && c.expiredAt < 0) {
              now += Math.min(tickMs, until - now);
              wheel.tick();
            }
            if (c.expiredAt >= 0) break;
            c.lastActivity = now;
          }
          while (c.expiredAt < 0) {
            now += tickMs;
            wheel.tick();
          }
          const silentFor = c.expiredAt - c.lastActivity;
          expect(silentFor).toBeGreaterThanOrEqual(limit);
          expect(silentFor).toBeLessThanOrEqual(limit + tickMs);
          expect(wheel.size()).toBe(0);
        },
      ),
    );
  });

  it("a connection unwatched (closed) is never told; keep alive 0 is not watched", () => {
    let now = 0;
    const wheel = new KeepaliveWheel(100, () => now);
    let told = 0;
    const a = { ...client(0, 1_500), keepaliveExpired: () => void told++ };
    const off = { ...client(0, 0), keepaliveExpired: () => void told++ };
    wheel.watch(a);
    wheel.watch(off);
    expect(wheel.size()).toBe(1);
    wheel.unwatch(a);
    now = 10_000;
    wheel.tick();
    expect(told).toBe(0);
  });
});
