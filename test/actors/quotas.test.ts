// src/actors/quotas.ts: whose buckets a publish is charged to, that forgetting idle accounts
// never forgets one still short of tokens, and that a new limits object (a reload) applies
// to a client made before it.
import { describe, expect, it } from "vitest";
import type { Metrics } from "../../src/actors/metrics.js";
import { type QuotaLimits, Quotas } from "../../src/actors/quotas.js";
import { NO_QUOTA, type PublishQuota } from "../../src/config/quotas.js";

function counting() {
  const counted: string[] = [];
  const metrics = { quotaExceeded: (p: string, s: string, a: string) => counted.push(`${p}/${s}/${a}`) };
  return { counted, metrics: metrics as unknown as Metrics };
}
// A rate so slow that no token comes back while a test runs.
const once = (burst: number): PublishQuota => ({
  messages_rate: 0.001,
  messages_burst: burst,
  bytes_rate: 0,
  bytes_burst: 0,
});

describe("the gateway's quotas", () => {
  it("with every quota off, everything passes and nothing is counted", () => {
    const { counted, metrics } = counting();
    const quotas = new Quotas(() => ({ per_client: NO_QUOTA, per_account: NO_QUOTA }), metrics);
    const c = quotas.forClient("mqtt", "A");
    for (let i = 0; i < 1000; i++) expect(c.admit(1_000_000)).toBeUndefined();
    expect(counted).toEqual([]);
  });

  it("an account's bucket is shared by its clients of both protocols, and kept while it is short of tokens", () => {
    const { counted, metrics } = counting();
    const quotas = new Quotas(() => ({ per_client: NO_QUOTA, per_account: once(2) }), metrics);
    expect(quotas.forClient("mqtt", "A").admit(1)).toBeUndefined();
    expect(quotas.forClient("amqp", "A").admit(1)).toBeUndefined();
    // Many other accounts come and go: the sweep runs, and must not forget A's spent bucket.
    for (let i = 0; i < 500; i++) expect(quotas.forClient("mqtt", `other-${i}`).admit(1)).toBeUndefined();
    expect(quotas.forClient("amqp", "A").admit(1)).toMatch(/limits\.per_account allows 0\.001 messages\/s \(burst 2\)/);
    expect(counted).toEqual(["amqp/account/A"]);
  });

  it("a new limits object (a reload) applies to a client made before it", () => {
    const { counted, metrics } = counting();
    let limits: QuotaLimits = { per_client: once(1), per_account: NO_QUOTA };
    const quotas = new Quotas(() => limits, metrics);
    const c = quotas.forClient("mqtt", "A");
    expect(c.admit(1)).toBeUndefined();
    expect(c.admit(1)).toMatch(/per_client/);
    limits = { per_client: NO_QUOTA, per_account: NO_QUOTA };
    expect(c.admit(1)).toBeUndefined();
    limits = { per_client: once(3), per_account: NO_QUOTA };
    // Turned on again: a fresh burst of 3.
    expect([c.admit(1), c.admit(1), c.admit(1)]).toEqual([undefined, undefined, undefined]);
    expect(c.admit(1)).toMatch(/burst 3/);
    expect(counted).toEqual(["mqtt/client/A", "mqtt/client/A"]);
  });
});
