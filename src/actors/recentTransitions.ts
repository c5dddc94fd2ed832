/** One change of an actor's state, as the live statecharts page shows it. */
export interface Transition {
  readonly at: number;
  readonly event: string;
  /** "" when the actor has just started. */
  readonly from: string;
  /** "" when the actor has left the registry. */
  readonly to: string;
}

/**
 * The last few transitions of one actor, oldest first. Fixed size, so ten thousand
 * connections cost ten thousand small arrays however long they live.
 */
export class RecentTransitions {
  private readonly slots: Array<Transition | undefined>;
  private next = 0;
  private count = 0;

  constructor(readonly capacity: number) {
    this.slots = new Array(capacity);
  }

  push(t: Transition): void {
    this.slots[this.next] = t;
    this.next = (this.next + 1) % this.capacity;
    this.count = Math.min(this.count + 1, this.capacity);
  }

  toArray(): Transition[] {
    const out: Transition[] = [];
    const start = (this.next - this.count + this.capacity) % this.capacity;
    for (let i = 0; i < this.count; i++) out.push(this.slots[(start + i) % this.capacity]!);
    return out;
  }
}
