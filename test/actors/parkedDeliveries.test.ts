import { describe, expect, it, vi } from "vitest";
import { ParkedDeliveries, type ParkedSession } from "../../src/actors/mqtt/parkedDeliveries.js";
import type { StoredSession } from "../../src/actors/mqtt/sessionStore.js";
import type { StoredDelivery } from "../../src/actors/mqtt/storedDelivery.js";

/** Readers as the parking sees them: something that can be stopped. */
function readers(...filters: string[]) {
  const byFilter = new Map(filters.map((f) => [f, { stop: vi.fn() } as unknown as StoredDelivery]));
  const stopped = () => [...byFilter.values()].filter((r) => vi.mocked(r.stop).mock.calls.length > 0).length;
  return { byFilter, stopped };
}

const record = {
  epoch: "e",
  subscriptions: [],
  expiresAt: Date.now() + 60_000,
  expirySec: 60,
} as unknown as StoredSession;
const session = (byFilter: Map<string, StoredDelivery>, revision: number): ParkedSession => ({
  epoch: "e",
  revision,
  record,
  byFilter,
});

describe("parked stored readers (parkedDeliveries.ts)", () => {
  it("readers whose record is written are parked for a resume here", () => {
    const parked = new ParkedDeliveries();
    const r = readers("a/#", "b");
    parked.parkingBegins("A", "dev-1", r.byFilter);
    parked.park("A", "dev-1", session(r.byFilter, 7), r.byFilter);
    expect(parked.recordOf("A", "dev-1")?.revision).toBe(7);
    expect(parked.size).toBe(2);
    expect(r.stopped()).toBe(0);
  });

  it("a client id dropped while its record is still being written (another gateway took the session) is never parked: its readers stop", () => {
    const parked = new ParkedDeliveries();
    const r = readers("a/#", "b");
    parked.parkingBegins("A", "dev-1", r.byFilter);
    // The other gateway's ask (or its claim) arrives before the detach's write is answered.
    parked.drop("A", "dev-1");
    expect(r.stopped()).toBe(2);
    parked.park("A", "dev-1", session(r.byFilter, 7), r.byFilter);
    expect(parked.recordOf("A", "dev-1")).toBeUndefined();
    expect(parked.size).toBe(0);
  });

  it("a record that was not written parks nothing; another client id's drop touches nothing", () => {
    const parked = new ParkedDeliveries();
    const r = readers("a");
    const other = readers("x");
    parked.parkingBegins("A", "dev-1", r.byFilter);
    parked.parkingBegins("A", "dev-2", other.byFilter);
    parked.drop("A", "dev-3");
    parked.drop("B", "dev-1");
    parked.park("A", "dev-1", undefined, r.byFilter);
    expect(r.stopped()).toBe(1);
    expect(other.stopped()).toBe(0);
    parked.park("A", "dev-2", session(other.byFilter, 3), other.byFilter);
    expect(parked.recordOf("A", "dev-2")?.revision).toBe(3);
    parked.stopAll();
    expect(other.stopped()).toBe(1);
  });
});
