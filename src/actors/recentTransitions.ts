/** One change of an actor's state, as the live statecharts page shows it. */
export interface Transition {
  readonly at: number;
  readonly event: string;
  /** "" when the actor has just started. */
  readonly from: string;
  /** "" when the actor has left the registry. */
  readonly to: string;
}

/** Times are kept as milliseconds since this, small integers rather than boxed doubles. */
const EPOCH = Date.now();
const FIELDS = 4;

/**
 * The last few transitions of one actor, oldest first. Fixed size, so ten thousand
 * connections cost ten thousand small arrays however long they live. Kept flat (time,
 * event, from, to, then the next one) rather than an object per transition: an idle
 * connection's two actors hold half a dozen transitions each (docs/performance.md).
 */
export class RecentTransitions {
  /** Grows as transitions come (most actors make a handful), then turns into a ring. */
  private readonly slots: Array<number | string> = [];
  private next = 0;

  constructor(readonly capacity: number) {}

  /** One transition, from its parts: the registry records every transition of every actor, without an object for each. */
  add(at: number, event: string, from: string, to: string): void {
    let i = this.slots.length;
    if (i >= this.capacity * FIELDS) {
      i = this.next * FIELDS;
      this.next = (this.next + 1) % this.capacity;
    }
    this.slots[i] = at - EPOCH;
    this.slots[i + 1] = event;
    this.slots[i + 2] = from;
    this.slots[i + 3] = to;
  }

  /** When the newest transition happened (ms since the epoch). */
  lastAt(): number | undefined {
    const n = this.slots.length / FIELDS;
    if (n === 0) return undefined;
    const i = ((this.next + n - 1) % n) * FIELDS;
    return (this.slots[i] as number) + EPOCH;
  }

  toArray(): Transition[] {
    const n = this.slots.length / FIELDS;
    const out: Transition[] = [];
    for (let k = 0; k < n; k++) {
      const i = ((this.next + k) % n) * FIELDS;
      const s = this.slots;
      out.push({
        at: (s[i] as number) + EPOCH,
        event: s[i + 1] as string,
        from: s[i + 2] as string,
        to: s[i + 3] as string,
      });
    }
    return out;
  }
}
