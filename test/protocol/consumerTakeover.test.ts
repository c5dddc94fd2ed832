import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { pinnedIdOf, takeoverSteps } from "../../src/protocol/consumerTakeover.js";

const state = fc.record({
  pinnedId: fc.option(fc.string({ minLength: 1, maxLength: 22 }), { nil: undefined }),
  waiting: fc.nat(600),
  ackPending: fc.nat(1000),
});

describe("what a resume asks of a pinned consumer", () => {
  it.each([
    // [pinned, waiting, ack pending] -> steps: the fleet's cases
    [undefined, 0, 0, "none"], // a command filter that never delivered, its pulls expired
    ["pin-1", 0, 0, "unpin"], // a reader that delivered and acknowledged everything, then went
    ["pin-1", 2, 0, "unpin_reset"], // its pulls still wait (a quick reconnect)
    [undefined, 1, 0, "unpin_reset"], // an ended pull without an id could still take the pin
    ["pin-1", 0, 3, "unpin_reset"], // delivered, not acknowledged: handed back at once
    [undefined, 0, 3, "unpin_reset"], // the pin lapsed (priority_timeout) with messages held
  ] as const)("pinned %s, %i waiting, %i held: %s", (pinnedId, waiting, ackPending, steps) => {
    expect(takeoverSteps({ pinnedId, waiting, ackPending })).toBe(steps);
  });

  it("rewinds whenever something is held or a pull still waits, and never rewinds without fencing", () => {
    fc.assert(
      fc.property(state, (s) => {
        const steps = takeoverSteps(s);
        expect(steps === "unpin_reset").toBe(s.waiting > 0 || s.ackPending > 0);
        // A pin left behind is always released: a new reader without an id would wait out priority_timeout.
        if (s.pinnedId) expect(steps).not.toBe("none");
      }),
    );
  });

  it("reads the group's pinned id from an INFO answer, and nothing from other groups or shapes", () => {
    const info = (groups: unknown) => ({ name: "c", priority_groups: groups });
    expect(
      pinnedIdOf(info([{ group: "mqgw", pinned_client_id: "abc", pinned_ts: "2026-12-06T00:00:00Z" }]), "mqgw"),
    ).toBe("abc");
    expect(pinnedIdOf(info([{ group: "mqgw" }]), "mqgw")).toBeUndefined();
    expect(pinnedIdOf(info([{ group: "mqgw", pinned_client_id: "" }]), "mqgw")).toBeUndefined();
    expect(pinnedIdOf(info([{ group: "other", pinned_client_id: "abc" }]), "mqgw")).toBeUndefined();
    fc.assert(
      fc.property(fc.anything(), (groups) => {
        const id = pinnedIdOf(info(groups), "mqgw");
        expect(id === undefined || (typeof id === "string" && id.length > 0)).toBe(true);
      }),
    );
  });
});
