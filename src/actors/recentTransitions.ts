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
  /** Grows as transitions come (most actors make a handful), then turns into a ring. */
  private readonly slots: Transition[] = [];
  private next = 0;

  constructor(readonly capacity: number) {}

  push(t: Transition): void {
    if (this.slots.length < this.capacity) {
      this.slots.push(t);
      return;
    }
    this.slots[this.next] = t;
    this.next = (this.next + 1) % this.capacity;
  }

  toArray(): Transition[] {
    return [...this.slots.slice(this.next), ...this.slots.slice(0, this.next)];
  }
}
