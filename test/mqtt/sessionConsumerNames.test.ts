import { createHash } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { sessionConsumerName } from "../../src/actors/mqtt/sessionConsumers.js";

describe("session consumer names", () => {
  it("without an epoch: the name records from before epochs hold, the same for the same session and filter", () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.string(), (account, clientId, filter) => {
        const digest = createHash("sha256").update(`${account}\u0000${clientId}\u0000${filter}`).digest("hex");
        expect(sessionConsumerName(account, clientId, filter, undefined)).toBe(`mqgw-${digest.slice(0, 24)}`);
      }),
    );
  });

  it("with an epoch: that base and a random suffix of 8 hex digits, drawn anew for every name", () => {
    const names = Array.from({ length: 3000 }, () => sessionConsumerName("A", "dev-1", "fleet/all/#", "e1"));
    const digest = createHash("sha256").update("A\u0000dev-1\u0000fleet/all/#\u0000e1").digest("hex");
    for (const n of names) expect(n).toMatch(new RegExp(`^mqgw-${digest.slice(0, 24)}-[0-9a-f]{8}$`));
    // 3,000 draws of 32 bits: a repeat is about 1 in 1,000; more than one would mean no randomness.
    expect(new Set(names).size).toBeGreaterThanOrEqual(2999);
  });
});
