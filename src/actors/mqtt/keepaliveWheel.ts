/**
 * Keep-alive deadlines of every MQTT connection on one shared clock. A connection only
 * notes the time of its last packet (a field write per read); the wheel looks at it when
 * the deadline comes and either tells the connection it expired or files it again at the
 * new deadline. Was an xstate delayed event per connection, rescheduled (a setTimeout
 * cancelled and made again, and a machine event) on activity: a Timeout and a scheduled
 * event held by every idle connection, and that CPU per CONNECT (docs/performance.md).
 */
export interface KeepaliveWatched {
  /** `Date.now()` of the last packet read. */
  readonly lastActivity: number;
  /** [MQTT-3.1.2-24] one and a half times the keep alive, in ms. */
  readonly keepaliveLimitMs: number;
  /** The slot the wheel filed it in (the wheel's own bookkeeping). */
  keepaliveSlot: number;
  keepaliveExpired(): void;
}

export class KeepaliveWheel {
  /** Connections by the tick at which their deadline falls. */
  private readonly slots = new Map<number, Set<KeepaliveWatched>>();
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly tickMs = 250,
    private readonly now: () => number = Date.now,
  ) {}

  /** Watches a connection from its last activity on; a limit of 0 (keep alive off) is not watched. */
  watch(c: KeepaliveWatched): void {
    if (c.keepaliveLimitMs <= 0) return;
    this.file(c, c.lastActivity + c.keepaliveLimitMs);
    this.timer ??= setInterval(() => this.tick(), this.tickMs).unref();
  }

  unwatch(c: KeepaliveWatched): void {
    const slot = this.slots.get(c.keepaliveSlot);
    if (!slot?.delete(c)) return;
    if (slot.size === 0) this.slots.delete(c.keepaliveSlot);
    if (this.slots.size === 0) this.stop();
  }

  size(): number {
    let n = 0;
    for (const s of this.slots.values()) n += s.size;
    return n;
  }

  /** Runs every tick: deadlines passed are checked against each connection's last activity. */
  tick(): void {
    const now = this.now();
    const due = Math.floor(now / this.tickMs);
    for (const [at, slot] of this.slots) {
      if (at > due) continue;
      this.slots.delete(at);
      for (const c of slot) {
        const deadline = c.lastActivity + c.keepaliveLimitMs;
        if (deadline <= now) c.keepaliveExpired();
        else this.file(c, deadline, due + 1);
      }
    }
    if (this.slots.size === 0) this.stop();
  }

  /**
   * Files it in the slot its deadline falls in (not before `from`: a slot being handled):
   * the first tick at or after the deadline finds it, so it is told at most one tick late,
   * and never early (the deadline itself is checked).
   */
  private file(c: KeepaliveWatched, deadline: number, from = 0): void {
    const at = Math.max(Math.floor(deadline / this.tickMs), from);
    c.keepaliveSlot = at;
    let slot = this.slots.get(at);
    if (!slot) {
      slot = new Set();
      this.slots.set(at, slot);
    }
    slot.add(c);
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}

/** The gateway's one wheel (every MQTT listener's connections). */
export const keepaliveWheel = new KeepaliveWheel();

/**
 * Connections not yet past CONNECT, each filed once with its connect timeout as the limit
 * (its "activity" is its start, and nothing renews it: a CONNECT dribbled byte by byte
 * still times out).
 */
export const connectWheel = new KeepaliveWheel();

/** Files a connection's connect deadline, from now; `connectWheel.unwatch` it at CONNECT. */
export function connectDeadline(timeoutMs: number, expired: () => void): KeepaliveWatched {
  const d: KeepaliveWatched = {
    lastActivity: Date.now(),
    keepaliveLimitMs: timeoutMs,
    keepaliveSlot: 0,
    keepaliveExpired: expired,
  };
  connectWheel.watch(d);
  return d;
}
