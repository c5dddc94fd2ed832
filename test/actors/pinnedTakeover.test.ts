// Which servers and which JetStream answers let a resume take its consumer over in place
// (docs/decisions/consumer-takeover.md); the takeover itself is tested end to end in
// test/mqtt/consumerLimit.test.ts, sessionLifecycle.test.ts and faults/sessionFleet.test.ts.
import { JetStreamApiError } from "@nats-io/jetstream";
import { describe, expect, it } from "vitest";
import { notInPlace, takesOverInPlace } from "../../src/actors/mqtt/pinnedTakeover.js";

const apiError = (err_code: number) => new JetStreamApiError({ code: 400, err_code, description: "x" });

describe("taking a consumer over in place", () => {
  it.each([
    ["2.15.1", true],
    ["2.14.0", true],
    ["v2.14.3", true],
    ["3.0.0", true],
    ["2.13.9", false],
    ["2.11.0", false],
    ["2.10.22", false],
    ["", false],
    [undefined, false],
  ])("nats-server %s: %s (pinned_client came with 2.11, consumer reset with 2.14)", (version, yes) => {
    expect(takesOverInPlace(version)).toBe(yes);
  });

  it("only 'consumer not found' and 'no such priority group' send a resume the old way", () => {
    expect(notInPlace(apiError(10014))).toBe(true);
    expect(notInPlace(apiError(10160))).toBe(true);
    // A cluster electing its leader, a timeout: waited out, never a second consumer.
    expect(notInPlace(apiError(10008))).toBe(false);
    expect(notInPlace(new Error("timeout"))).toBe(false);
  });
});
