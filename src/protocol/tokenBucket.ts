/**
 * Token buckets for publish quotas (docs/decisions/quotas.md). Pure: time is a number of
 * milliseconds the caller passes in, so the properties in test/protocol/tokenBucket.test.ts
 * can drive it through any schedule. A bucket holds at most `burst` tokens and gains `rate`
 * per second; over any window of t seconds it gives out at most rate * t + burst.
 */
export interface BucketRate {
  /** Tokens per second; 0: no limit (the bucket admits everything and keeps no time). */
  readonly rate: number;
  /** The bucket's capacity: what may go at once after a quiet spell. */
  readonly burst: number;
}

export class TokenBucket {
  private tokens: number;
  private at: number;

  constructor(
    private limit: BucketRate,
    now: number,
  ) {
    this.tokens = limit.burst;
    this.at = now;
  }

  /** Whether `n` tokens are there now (refilling first); takes nothing. */
  has(n: number, now: number): boolean {
    if (this.limit.rate === 0) return true;
    this.refill(now);
    return this.tokens >= n;
  }

  /** Takes `n` tokens that `has` said are there. */
  take(n: number): void {
    if (this.limit.rate !== 0) this.tokens -= n;
  }

  /**
   * A reload's new rate and burst. The tokens earned so far stay, cut to the new burst: a
   * client that was over stays over until it has earned its way back at the new rate. A
   * bucket that had no limit starts full.
   */
  reconfigure(limit: BucketRate, now: number): void {
    if (this.limit.rate === 0) {
      this.tokens = limit.burst;
      this.at = now;
    } else {
      this.refill(now);
      this.tokens = Math.min(this.tokens, limit.burst);
    }
    this.limit = limit;
  }

  /** True once the bucket is full again at `now`: forgetting it then changes nothing. */
  full(now: number): boolean {
    return this.limit.rate === 0 || this.tokens + ((now - this.at) * this.limit.rate) / 1000 >= this.limit.burst;
  }

  private refill(now: number): void {
    // A clock that stepped back earns nothing (performance.now() does not, but a caller's might).
    if (now > this.at) {
      this.tokens = Math.min(this.limit.burst, this.tokens + ((now - this.at) * this.limit.rate) / 1000);
      this.at = now;
    }
  }
}

/** The two buckets of one quota: messages and bytes. */
export interface QuotaBuckets {
  readonly messages: TokenBucket;
  readonly bytes: TokenBucket;
}

export type QuotaScope = "client" | "account";

/**
 * One publish of `bytes` against the client's and its account's quotas: admitted only when
 * all four buckets have room, and then taken from all four, so a message refused by one
 * quota costs nothing from the others. Answers the scope that refused it, or undefined.
 */
export function admitPublish(
  client: QuotaBuckets,
  account: QuotaBuckets,
  bytes: number,
  now: number,
): QuotaScope | undefined {
  if (!client.messages.has(1, now) || !client.bytes.has(bytes, now)) return "client";
  if (!account.messages.has(1, now) || !account.bytes.has(bytes, now)) return "account";
  client.messages.take(1);
  client.bytes.take(bytes);
  account.messages.take(1);
  account.bytes.take(bytes);
  return undefined;
}
