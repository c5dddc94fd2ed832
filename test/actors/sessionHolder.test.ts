import { describe, expect, it } from "vitest";
import { holderElsewhere } from "../../src/actors/mqtt/sessionHolder.js";
import type { StoredSession } from "../../src/actors/mqtt/sessionStore.js";
import { PARK_MS } from "../../src/actors/mqtt/storedDeliveryOptions.js";

const NOW = 1_000_000_000;
const EXPIRY = 600;
const withConsumer = [{ subscription: { topic: "a/#", qos: 1 as const }, subscriptionId: undefined, consumer: "c1" }];
const liveOnly = [{ subscription: { topic: "a/#", qos: 0 as const }, subscriptionId: undefined }];

/** A record written `agoMs` before NOW by `owner`. */
const record = (owner: string | undefined, connected: boolean, agoMs: number, subscriptions = withConsumer) =>
  ({
    subscriptions,
    expiresAt: NOW - agoMs + EXPIRY * 1_000,
    expirySec: EXPIRY,
    owner,
    connected,
  }) satisfies StoredSession;

describe("the gateway a connection asks before it reads a session", () => {
  it.each([
    ["no record", undefined, undefined],
    ["connected here (an ended connection, or this id before a restart)", record("gw-a", true, 0), undefined],
    ["connected elsewhere", record("gw-b", true, 60_000), "gw-b"],
    ["detached elsewhere just now, readers may be parked there", record("gw-b", false, 10), "gw-b"],
    ["detached elsewhere within the parking time", record("gw-b", false, PARK_MS - 1), "gw-b"],
    ["detached elsewhere long ago: nothing parked any more", record("gw-b", false, 60_000), undefined],
    ["detached here", record("gw-a", false, 10), undefined],
    ["detached elsewhere with nothing stored to read", record("gw-b", false, 10, liveOnly), undefined],
    [
      "an older gateway's record (no expiry kept, no parking)",
      { ...record("gw-b", false, 10), expirySec: undefined },
      undefined,
    ],
    ["no owner", record(undefined, false, 10), undefined],
  ])("%s", (_case, session, asked) => {
    expect(holderElsewhere(session, "gw-a", NOW)).toBe(asked);
  });
});
