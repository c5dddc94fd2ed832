/**
 * Whether a gateway should keep an index of an account's sessions bucket (the client ids
 * with a record) so that clean starts skip their read of the bucket
 * (docs/decisions/mqtt-sessions.md, "Clean starts without a bucket read"). The index is paid
 * for with every record written to the bucket (its watch hears each one); it pays back with
 * every clean start it answers. So it is kept while clean starts are a large enough share of
 * the writes, measured over a sliding minute: a fleet of persistent sessions with an
 * occasional clean-start publisher does not pay an echo per resume and per drop for it.
 *
 * Pure: the caller says when (`now`, ms) each clean start and each write happened.
 */
export class IndexDemand {
  /** Counts of the window before the current one, and of the current one. */
  private previous = { cleanStarts: 0, writes: 0 };
  private current = { cleanStarts: 0, writes: 0 };
  private windowStart: number;

  constructor(
    now: number,
    private readonly o: IndexDemandOptions = INDEX_DEMAND,
  ) {
    this.windowStart = now;
  }

  cleanStart(now: number): void {
    this.roll(now);
    this.current.cleanStarts++;
  }

  write(now: number): void {
    this.roll(now);
    this.current.writes++;
  }

  /** Worth making: enough clean starts, and at least one for every `followRatio` writes. */
  worthFollowing(now: number): boolean {
    const { cleanStarts, writes } = this.rates(now);
    return cleanStarts >= this.o.minCleanStarts && cleanStarts * this.o.followRatio >= writes;
  }

  /** Worth dropping: clean starts fell below one for every `unfollowRatio` writes (a wider band than the start's, so it does not flap). */
  worthDropping(now: number): boolean {
    const { cleanStarts, writes } = this.rates(now);
    return cleanStarts * this.o.unfollowRatio < writes;
  }

  /** Events in the last window: the current one's, and the previous one's share that still falls inside. */
  rates(now: number): { cleanStarts: number; writes: number } {
    this.roll(now);
    const left = 1 - Math.min(1, (now - this.windowStart) / this.o.windowMs);
    return {
      cleanStarts: this.current.cleanStarts + this.previous.cleanStarts * left,
      writes: this.current.writes + this.previous.writes * left,
    };
  }

  private roll(now: number): void {
    const elapsed = now - this.windowStart;
    if (elapsed < this.o.windowMs) return;
    // A whole window or more without a roll: the previous one is empty too.
    this.previous = elapsed < 2 * this.o.windowMs ? this.current : { cleanStarts: 0, writes: 0 };
    this.current = { cleanStarts: 0, writes: 0 };
    this.windowStart = now - (elapsed % this.o.windowMs);
  }
}

export interface IndexDemandOptions {
  readonly windowMs: number;
  /** Fewer clean starts than this in a window: reading the bucket for each costs little. */
  readonly minCleanStarts: number;
  /** Followed once clean starts × this ≥ writes. */
  readonly followRatio: number;
  /** Dropped once clean starts × this < writes. */
  readonly unfollowRatio: number;
}

/**
 * A clean start's read cost about 1.2 ms of CPU (gateway and nats-server) and a round trip;
 * the index's echo of one write 4-5 % of a resume's gateway CPU in the sessions bench (some
 * 15-20 us) plus nats-server's delivery of it (docs/performance.md, fourteenth run). Kept
 * once clean starts are a sixteenth of the writes (the echo then costs at most about what
 * the reads it saves would), dropped below a sixty-fourth.
 */
export const INDEX_DEMAND: IndexDemandOptions = {
  windowMs: 60_000,
  minCleanStarts: 16,
  followRatio: 16,
  unfollowRatio: 64,
};
