import type { PublishQuota } from "../config/quotas.js";
import { admitPublish, type QuotaBuckets, type QuotaScope, TokenBucket } from "../protocol/tokenBucket.js";
import type { Metrics, Protocol } from "./metrics.js";

/** The part of the config the quotas read (GatewayConfig.limits): read again at each publish, so a reload applies at once. */
export interface QuotaLimits {
  readonly per_client: PublishQuota;
  readonly per_account: PublishQuota;
}

/** Accounts whose buckets are kept before full ones are forgotten (a full bucket made again is the same bucket). */
const SWEEP_FROM = 64;

/**
 * The publish quotas of this gateway process (docs/decisions/quotas.md): each client's
 * buckets live with its connection (ClientQuota), each account's here, shared by every
 * client of that account on this process, MQTT and AMQP alike. A reload (SIGHUP) gives a
 * new limits object: every bucket takes the new rate and burst at its next publish.
 */
export class Quotas {
  private seen: QuotaLimits | undefined;
  /** Bumped for each limits object seen: a bucket made for an older one is reconfigured. */
  private generation = 0;
  /** 0: every quota is off, and a publish costs one comparison. */
  private limited = 0;
  /**
   * The last generation each bucket kind was off in: a bucket older than that missed the
   * off spell (no publish touches a bucket then) and starts full, as a quota turned on does.
   */
  private readonly offAt: Record<QuotaScope, OffAt> = {
    client: { messages: 0, bytes: 0 },
    account: { messages: 0, bytes: 0 },
  };
  private readonly accounts = new Map<string, Buckets>();
  private sweepAt = SWEEP_FROM;

  constructor(
    private readonly read: () => QuotaLimits,
    private readonly metrics: Metrics,
  ) {}

  forClient(protocol: Protocol, account: string): ClientQuota {
    return new ClientQuota(this, protocol, account);
  }

  /** A publish of `bytes` by `client`: undefined when admitted, else the quota that refused it (counted). */
  admit(client: ClientQuota, bytes: number): QuotaScope | undefined {
    const limits = this.limits();
    if (this.limited === 0) return undefined;
    const now = performance.now();
    const own = client.bucketsFor(limits.per_client, this.generation, this.offAt.client, now);
    const scope = admitPublish(own, this.accountBuckets(client.account, limits.per_account, now), bytes, now);
    if (scope) this.metrics.quotaExceeded(client.protocol, scope, client.account);
    return scope;
  }

  /** What a refusal says to the client: the quota, as configured. */
  describe(scope: QuotaScope): string {
    const q = scope === "client" ? this.limits().per_client : this.limits().per_account;
    const parts = [
      ...(q.messages_rate > 0 ? [`${q.messages_rate} messages/s (burst ${q.messages_burst})`] : []),
      ...(q.bytes_rate > 0 ? [`${q.bytes_rate} bytes/s (burst ${q.bytes_burst})`] : []),
    ];
    return `quota exceeded: limits.per_${scope} allows ${parts.join(", ")}`;
  }

  private limits(): QuotaLimits {
    const limits = this.read();
    if (limits !== this.seen) {
      this.seen = limits;
      this.generation++;
      const { per_client: c, per_account: a } = limits;
      this.limited = c.messages_rate + c.bytes_rate + a.messages_rate + a.bytes_rate;
      for (const [scope, q] of [
        ["client", c],
        ["account", a],
      ] as const) {
        if (q.messages_rate === 0) this.offAt[scope].messages = this.generation;
        if (q.bytes_rate === 0) this.offAt[scope].bytes = this.generation;
      }
    }
    return limits;
  }

  private accountBuckets(account: string, quota: PublishQuota, now: number): Buckets {
    let b = this.accounts.get(account);
    if (b) return b.follow(quota, this.generation, this.offAt.account, now);
    b = new Buckets(quota, this.generation, now);
    this.accounts.set(account, b);
    if (this.accounts.size >= this.sweepAt) {
      for (const [name, other] of this.accounts) if (other !== b && other.full(now)) this.accounts.delete(name);
      this.sweepAt = Math.max(SWEEP_FROM, this.accounts.size * 2);
    }
    return b;
  }
}

/** One client connection's quota: its own buckets, made at its first publish while a quota is on. */
export class ClientQuota {
  private own: Buckets | undefined;

  constructor(
    private readonly quotas: Quotas,
    readonly protocol: Protocol,
    readonly account: string,
  ) {}

  /** undefined: admitted; else why not, for the refusal's reason string or description. */
  admit(bytes: number): string | undefined {
    const scope = this.quotas.admit(this, bytes);
    return scope && this.quotas.describe(scope);
  }

  bucketsFor(quota: PublishQuota, generation: number, offAt: OffAt, now: number): Buckets {
    if (this.own) return this.own.follow(quota, generation, offAt, now);
    this.own = new Buckets(quota, generation, now);
    return this.own;
  }
}

interface OffAt {
  messages: number;
  bytes: number;
}

class Buckets implements QuotaBuckets {
  messages: TokenBucket;
  bytes: TokenBucket;

  constructor(
    quota: PublishQuota,
    private generation: number,
    now: number,
  ) {
    this.messages = new TokenBucket({ rate: quota.messages_rate, burst: quota.messages_burst }, now);
    this.bytes = new TokenBucket({ rate: quota.bytes_rate, burst: quota.bytes_burst }, now);
  }

  /**
   * The rates of the limits in force: a bucket made under an older config takes the new
   * ones, keeping what it has earned, unless its quota was off since (then it starts full).
   */
  follow(quota: PublishQuota, generation: number, offAt: OffAt, now: number): this {
    if (generation === this.generation) return this;
    const messages = { rate: quota.messages_rate, burst: quota.messages_burst };
    const bytes = { rate: quota.bytes_rate, burst: quota.bytes_burst };
    if (this.generation < offAt.messages) this.messages = new TokenBucket(messages, now);
    else this.messages.reconfigure(messages, now);
    if (this.generation < offAt.bytes) this.bytes = new TokenBucket(bytes, now);
    else this.bytes.reconfigure(bytes, now);
    this.generation = generation;
    return this;
  }

  full(now: number): boolean {
    return this.messages.full(now) && this.bytes.full(now);
  }
}
