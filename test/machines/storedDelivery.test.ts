import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { backoff, storedDeliveryMachine } from "../../src/machines/storedDelivery.js";
import { drive } from "./emitted.js";

const input = { backoffMs: 250, maxBackoffMs: 5_000 };
/** The edge's draw for each wait's jitter: the tests draw the longest (0.999999) or the shortest (0) wait. */
const failed = (reason = "timeout", limit = false, jitter = 0.999999) => ({
  type: "OPEN_FAILED" as const,
  reason,
  refused: false,
  permission: false,
  limit,
  jitter,
});

describe("storedDelivery machine", () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  it("waits between attempts, 250 ms doubling to 5 s, each jittered down by at most half", () => {
    const steps = [1, 2, 3, 4, 5, 6, 7, 30].map((n) => [backoff(input, n, 0), backoff(input, n, 0.999999)]);
    expect(steps).toEqual([
      [125, 250],
      [250, 500],
      [500, 1000],
      [1000, 2000],
      [2000, 4000],
      [2500, 5000],
      [2500, 5000],
      [2500, 5000],
    ]);
  });

  it("a failed open waits and asks again, as often as it fails, and reads once it succeeds", () => {
    const d = drive(storedDeliveryMachine, input);
    expect(d.types()).toEqual(["open"]);
    for (let i = 1; i <= 8; i++) {
      d.actor.send(failed());
      expect(d.actor.getSnapshot().hasTag("waiting")).toBe(true);
      vi.advanceTimersByTime(backoff(input, i, 0.999999) - 1);
      expect(d.types().filter((t) => t === "open")).toHaveLength(i);
      vi.advanceTimersByTime(1);
      expect(d.types().filter((t) => t === "open")).toHaveLength(i + 1);
    }
    d.actor.send({ type: "OPENED" });
    expect(d.types().at(-1)).toBe("reading");
    expect(d.actor.getSnapshot().hasTag("waiting")).toBe(false);
    // Reading again, it holds what a reader that never waited holds: the two share their steps.
    const never = drive(storedDeliveryMachine, input);
    never.actor.send({ type: "OPENED" });
    expect(d.actor.getSnapshot().context).toEqual(never.actor.getSnapshot().context);
  });

  it("a consumer lost while read: the reader goes, and the open is asked again after a short wait", () => {
    const d = drive(storedDeliveryMachine, input);
    d.actor.send({ type: "OPENED" });
    d.actor.send({ type: "CONSUMER_LOST", reason: "409 consumer deleted", jitter: 0 });
    expect(d.types().slice(-2)).toEqual(["drop_reader", "waiting"]);
    vi.advanceTimersByTime(125);
    expect(d.types().at(-1)).toBe("open");
  });

  it("a limit's refusal waits like any failure, and says it was a limit", () => {
    const d = drive(storedDeliveryMachine, input);
    d.actor.send(failed("stream S has reached its max_consumers", true));
    expect(d.emitted.at(-1)).toEqual({
      type: "waiting",
      reason: "stream S has reached its max_consumers",
      attempt: 1,
      limit: true,
    });
    expect(d.actor.getSnapshot().hasTag("waiting")).toBe(true);
  });

  it("only a refusal no wait can cure ends it", () => {
    const d = drive(storedDeliveryMachine, input);
    d.actor.send({
      type: "OPEN_FAILED",
      reason: "the gateway user may not subscribe to x",
      refused: true,
      permission: true,
      limit: false,
      jitter: 0,
    });
    expect(d.emitted.at(-1)).toEqual({
      type: "refused",
      reason: "the gateway user may not subscribe to x",
      permission: true,
    });
    vi.advanceTimersByTime(60_000);
    expect(d.types().filter((t) => t === "open")).toHaveLength(1);
  });

  it("replaced consumers are deleted, again after a wait when deleting fails, and stopping ends every wait", () => {
    const d = drive(storedDeliveryMachine, input);
    d.actor.send({ type: "OPENED" });
    d.actor.send({ type: "RETIRE" });
    d.actor.send({ type: "RETIRE_FAILED", jitter: 0 });
    vi.advanceTimersByTime(125);
    expect(d.types().filter((t) => t === "retire")).toHaveLength(2);
    d.actor.send({ type: "RETIRED" });
    d.actor.send(failed());
    d.actor.send({ type: "STOP" });
    expect(d.types().at(-1)).toBe("stop");
    vi.advanceTimersByTime(60_000);
    expect(d.types().at(-1)).toBe("stop");
  });

  it("a parked subscription is adopted within its time, or stops when the time runs out or its consumer goes", () => {
    const parked = { ...input, parkMs: 20_000 };
    const adopted = drive(storedDeliveryMachine, parked);
    adopted.actor.send({ type: "OPENED" });
    adopted.actor.send({ type: "PARK" });
    expect(adopted.actor.getSnapshot().hasTag("parked")).toBe(true);
    vi.advanceTimersByTime(19_999);
    adopted.actor.send({ type: "ADOPT" });
    expect(adopted.actor.getSnapshot().matches({ active: { read: "reading" } })).toBe(true);
    vi.advanceTimersByTime(60_000);
    expect(adopted.types()).not.toContain("stop");

    const left = drive(storedDeliveryMachine, parked);
    left.actor.send({ type: "OPENED" });
    left.actor.send({ type: "PARK" });
    vi.advanceTimersByTime(20_000);
    expect(left.types().at(-1)).toBe("stop");
    expect(left.actor.getSnapshot().status).toBe("done");

    const lost = drive(storedDeliveryMachine, parked);
    lost.actor.send({ type: "OPENED" });
    lost.actor.send({ type: "PARK" });
    lost.actor.send({ type: "CONSUMER_LOST", reason: "409 consumer deleted", jitter: 0 });
    expect(lost.types().at(-1)).toBe("stop");
  });

  it("a takeover with messages waiting looks at its pin after 1, 2, 4 and 8 s until it is served, and no more", () => {
    const d = drive(storedDeliveryMachine, input);
    d.actor.send({ type: "OPENED", awaitPin: true });
    const looks = () => d.types().filter((t) => t === "check_pin").length;
    vi.advanceTimersByTime(999);
    expect(looks()).toBe(0);
    vi.advanceTimersByTime(1);
    expect(looks()).toBe(1);
    // The pin with a pull that went: handed back, then looked at again after twice the wait.
    d.actor.send({ type: "PIN_LEFT_OVER", rewind: true, unpin: true });
    expect(d.emitted.at(-1)).toEqual({ type: "retake", rewind: true, unpin: true });
    d.actor.send({ type: "RETAKEN" });
    vi.advanceTimersByTime(2_000);
    expect(looks()).toBe(2);
    d.actor.send({ type: "PIN_UNKNOWN" });
    vi.advanceTimersByTime(4_000);
    expect(looks()).toBe(3);
    d.actor.send({ type: "PIN_LEFT_OVER", rewind: false, unpin: true });
    d.actor.send({ type: "RETAKE_FAILED" });
    vi.advanceTimersByTime(8_000);
    expect(looks()).toBe(4);
    // The last look: whatever it finds, the pin's priority_timeout bounds the rest.
    d.actor.send({ type: "PIN_LEFT_OVER", rewind: false, unpin: true });
    d.actor.send({ type: "RETAKEN" });
    vi.advanceTimersByTime(60_000);
    expect(looks()).toBe(4);
    expect(d.actor.getSnapshot().matches({ active: { read: { reading: "settled" } } })).toBe(true);

    const served = drive(storedDeliveryMachine, input);
    served.actor.send({ type: "OPENED", awaitPin: true });
    vi.advanceTimersByTime(1_000);
    served.actor.send({ type: "SERVED" });
    vi.advanceTimersByTime(60_000);
    expect(served.types().filter((t) => t === "check_pin")).toHaveLength(1);
  });

  it("a new consumer, or a takeover with nothing waiting, never looks at its pin", () => {
    for (const opened of [{ type: "OPENED" as const }, { type: "OPENED" as const, awaitPin: false }]) {
      const d = drive(storedDeliveryMachine, input);
      d.actor.send(opened);
      vi.advanceTimersByTime(60_000);
      expect(d.types()).toEqual(["open", "reading"]);
    }
  });

  it("a takeover that is parked or stopped while it looks at its pin looks no more", () => {
    const parked = drive(storedDeliveryMachine, { ...input, parkMs: 20_000 });
    parked.actor.send({ type: "OPENED", awaitPin: true });
    parked.actor.send({ type: "PARK" });
    parked.actor.send({ type: "ADOPT" });
    vi.advanceTimersByTime(60_000);
    expect(parked.types()).not.toContain("check_pin");

    const stopped = drive(storedDeliveryMachine, input);
    stopped.actor.send({ type: "OPENED", awaitPin: true });
    vi.advanceTimersByTime(1_000);
    stopped.actor.send({ type: "STOP" });
    vi.advanceTimersByTime(60_000);
    expect(stopped.types().filter((t) => t === "check_pin")).toHaveLength(1);
  });

  it("an adopted subscription never pinned, while an older reader's pull may still wait, looks at its pin as a takeover does", () => {
    const d = drive(storedDeliveryMachine, { ...input, parkMs: 20_000 });
    d.actor.send({ type: "OPENED" });
    d.actor.send({ type: "PARK" });
    d.actor.send({ type: "ADOPT", awaitPin: true });
    expect(d.actor.getSnapshot().matches({ active: { read: { reading: "awaitingPin" } } })).toBe(true);
    vi.advanceTimersByTime(1_000);
    expect(d.types().filter((t) => t === "check_pin")).toHaveLength(1);
    d.actor.send({ type: "SERVED" });
    vi.advanceTimersByTime(60_000);
    expect(d.types().filter((t) => t === "check_pin")).toHaveLength(1);
  });

  it("only a reading subscription parks", () => {
    const d = drive(storedDeliveryMachine, { ...input, parkMs: 20_000 });
    d.actor.send({ type: "PARK" });
    expect(d.actor.getSnapshot().hasTag("parked")).toBe(false);
    d.actor.send(failed());
    d.actor.send({ type: "PARK" });
    expect(d.actor.getSnapshot().hasTag("waiting")).toBe(true);
  });
});
