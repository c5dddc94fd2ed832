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
/** Time, event and state reached: where a transition came from is where the one before it went. */
const FIELDS = 3;

/**
 * The last few transitions of one actor, oldest first. Fixed size, so ten thousand
 * connections cost ten thousand small arrays however long they live. Kept flat (time,
 * event, state reached, then the next one) rather than an object per transition, in an
 * array grown to fit (a pushed-to array reserves 17 slots: 152 B where an idle connection's
 * actors need 6 to 12), and each transition's `from` is the `to` before it (docs/performance.md).
 */
export class RecentTransitions {
  /** Grows as transitions come (most actors make a handful), then turns into a ring. */
  private slots: Array<number | string> = [];
  private next = 0;
  /** Where the oldest transition kept came from. */
  private oldestFrom = "";

  constructor(readonly capacity: number) {}

  /**
   * One transition, from its parts: the registry records every transition of every actor,
   * without an object for each. Transitions follow each other: `from` is read for the first
   * only (each later one starts where the one before it ended).
   */
  add(at: number, event: string, from: string, to: string): void {
    const n = this.slots.length;
    let i = n;
    if (n === 0) this.oldestFrom = from;
    if (n >= this.capacity * FIELDS) {
      i = this.next * FIELDS;
      // The oldest goes: the next oldest came from where it went.
      this.oldestFrom = this.slots[i + 2] as string;
      this.next = (this.next + 1) % this.capacity;
    } else {
      const grown = new Array<number | string>(n + FIELDS);
      for (let k = 0; k < n; k++) grown[k] = this.slots[k]!;
      this.slots = grown;
    }
    this.slots[i] = at - EPOCH;
    this.slots[i + 1] = event;
    this.slots[i + 2] = to;
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
    let from = this.oldestFrom;
    for (let k = 0; k < n; k++) {
      const i = ((this.next + k) % n) * FIELDS;
      const s = this.slots;
      const to = s[i + 2] as string;
      out.push({ at: (s[i] as number) + EPOCH, event: s[i + 1] as string, from, to });
      from = to;
    }
    return out;
  }
}
