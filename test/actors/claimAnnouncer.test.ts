import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { type Claim, ClaimAnnouncer, claimsOf, MAX_BATCH_BYTES } from "../../src/actors/claimAnnouncer.js";

/** An announcer whose timer is the test's: `flush()` stands for it firing. */
function announcer() {
  const sent: Array<{ account: string; payload: string }> = [];
  const a = new ClaimAnnouncer((account, payload) => sent.push({ account, payload }), 60_000);
  return { a, sent };
}

describe("claims to the other gateways (claimAnnouncer.ts)", () => {
  it("a lone claim keeps the one-claim shape older gateways read", () => {
    const { a, sent } = announcer();
    a.announce("A", "dev-1", true);
    a.flush();
    expect(sent).toHaveLength(1);
    const m = JSON.parse(sent[0]!.payload);
    expect(m).toEqual({ account: "A", client_id: "dev-1", at: expect.any(Number), clean_start: true });
  });

  it("the claims of one window go as one message per account, in the order made", () => {
    const { a, sent } = announcer();
    for (let i = 0; i < 5; i++) a.announce("A", `a-${i}`, i % 2 === 0);
    a.announce("B", "b-0", false);
    expect(sent).toHaveLength(0);
    a.flush();
    expect(sent.map((s) => s.account)).toEqual(["A", "B"]);
    const first = claimsOf(JSON.parse(sent[0]!.payload));
    expect(first.account).toBe("A");
    expect(first.claims.map((c) => c.client_id)).toEqual(["a-0", "a-1", "a-2", "a-3", "a-4"]);
    expect(first.claims.map((c) => c.clean_start)).toEqual([true, false, true, false, true]);
    a.flush();
    expect(sent).toHaveLength(2);
  });

  it("a full batch goes at once, without waiting for the window", () => {
    const { a, sent } = announcer();
    for (let i = 0; i < 512; i++) a.announce("A", `c-${i}`, true);
    expect(sent).toHaveLength(1);
    expect(claimsOf(JSON.parse(sent[0]!.payload)).claims).toHaveLength(512);
  });

  it("a batch of long client ids goes before it would pass the byte bound: every message stays far under max_payload", () => {
    const { a, sent } = announcer();
    // Client ids as long as a default max_control_line lets through, some needing JSON escapes.
    const ids = Array.from({ length: 300 }, (_, i) => (i % 2 ? "\u0001" : "é").repeat(3_000) + i);
    for (const id of ids) a.announce("A", id, true);
    a.flush();
    expect(sent.length).toBeGreaterThan(1);
    for (const s of sent) expect(Buffer.byteLength(s.payload)).toBeLessThanOrEqual(MAX_BATCH_BYTES);
    expect(sent.flatMap((s) => claimsOf(JSON.parse(s.payload)).claims.map((c) => c.client_id))).toEqual(ids);
  });

  it("the window's timer sends what waits, once", () => {
    vi.useFakeTimers();
    try {
      const sent: string[] = [];
      const a = new ClaimAnnouncer((_, payload) => sent.push(payload), 50);
      a.announce("A", "late", true);
      vi.advanceTimersByTime(49);
      expect(sent).toHaveLength(0);
      vi.advanceTimersByTime(1);
      expect(claimsOf(JSON.parse(sent[0]!)).claims.map((c) => c.client_id)).toEqual(["late"]);
      vi.advanceTimersByTime(500);
      expect(sent).toHaveLength(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it("property: whatever is announced is read back, per account, in order, in either shape", () => {
    const claim = fc.record({
      account: fc.constantFrom("A", "B", ""),
      clientId: fc.string(),
      cleanStart: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(claim, { maxLength: 40 }), (claims) => {
        const { a, sent } = announcer();
        for (const c of claims) a.announce(c.account, c.clientId, c.cleanStart);
        a.flush();
        const heard = new Map<string, Claim[]>();
        for (const s of sent) {
          const m = claimsOf(JSON.parse(s.payload));
          expect(m.account).toBe(s.account);
          heard.set(s.account, [...(heard.get(s.account) ?? []), ...m.claims]);
        }
        for (const account of new Set(claims.map((c) => c.account))) {
          const mine = claims.filter((c) => c.account === account);
          expect(heard.get(account)?.map((c) => [c.client_id, c.clean_start])).toEqual(
            mine.map((c) => [c.clientId, c.cleanStart]),
          );
        }
      }),
    );
  });

  it("malformed claims are left out, the rest of the message read", () => {
    expect(claimsOf(null).claims).toEqual([]);
    expect(claimsOf("x").claims).toEqual([]);
    expect(claimsOf({ account: "A", client_id: 7, at: 1 }).claims).toEqual([]);
    const m = claimsOf({
      account: "A",
      claims: [{ client_id: "ok", at: 1 }, { at: 2 }, null, { client_id: "no time" }],
    });
    expect(m.claims).toEqual([{ client_id: "ok", at: 1 }]);
  });
});
