import { parseJsAckReply } from "../../protocol/jsAckReply.js";

/** What a stored delivery does with a message its consumer sent. */
export type Arrival =
  /** New to the client: deliver it. */
  | "deliver"
  /** Sent again while the client holds it (ack_wait ran out, a reopened consumer): its newer reply is kept, nothing sent. */
  | "again"
  /** Acknowledged by the client already (below the floor, or above it out of order): settle it, send nothing. */
  | "settle";

/**
 * What one stored subscription's client was sent and acknowledged, by stream sequence: the
 * floor and the out-of-order acknowledgements above it that the session record keeps for the
 * next connection's consumer, and the acknowledgement subjects of what the client holds. No
 * I/O: the stored delivery (storedDelivery.ts) settles and delivers as it answers.
 */
export class AckLedger {
  /**
   * What was received and not yet acknowledged: each one's ack subject by stream sequence, in
   * the order received (not the message: its payload would stay until the client's PUBACK).
   */
  private readonly pending = new Map<number, string>();
  /** Sequences acknowledged while a lower one was still pending. */
  private ackedAbove: number[] = [];
  /** The highest sequence acknowledged so far (with the floor it started from). */
  private highestAcked: number;
  /** Acknowledged by the client, to be settled without sending when a consumer hands them back. */
  private readonly skip: Set<number>;

  constructor(
    resume: { readonly floor: number; readonly above: readonly number[] } | undefined,
    private readonly maxAckPending: number,
  ) {
    this.highestAcked = resume?.floor ?? 0;
    this.skip = new Set(resume?.above ?? []);
  }

  /** How many messages the client holds unacknowledged. */
  get held(): number {
    return this.pending.size;
  }

  holds(seq: number): boolean {
    return this.pending.has(seq);
  }

  /** Forgets what the client holds: the next connection's consumer hands it back from the floor. */
  clear(): void {
    this.pending.clear();
  }

  /** A consumer of `seq` sent it with `reply` to acknowledge: what to do with it. */
  arrive(seq: number, reply: string): Arrival {
    if (this.pending.has(seq)) {
      // MQTT sends nothing twice on one connection [MQTT-4.4.0-1]; the newest delivery's
      // reply is the one to acknowledge.
      this.pending.set(seq, reply);
      return "again";
    }
    if (this.skip.delete(seq)) return "settle";
    // Below the floor: acknowledged already (a reopened consumer starts at the floor).
    if (seq <= this.highestAcked && this.pending.size === 0) return "settle";
    this.pending.set(seq, reply);
    return "deliver";
  }

  /**
   * The client took `seq` over (PUBACK / PUBREC): the reply to settle, or undefined when it
   * holds no such message. `consumer` is the one read now: a message a replaced consumer
   * delivered is handed back once more by its successor, and settled then unsent.
   */
  ack(seq: number, consumer: string): string | undefined {
    const reply = this.pending.get(seq);
    if (reply === undefined) return undefined;
    this.pending.delete(seq);
    if (seq > this.highestAcked) this.highestAcked = seq;
    const lowest = this.pending.keys().next().value;
    if (lowest !== undefined && lowest < seq) {
      this.ackedAbove.push(seq);
      // Below the lowest pending, a sequence is under the floor: a reset does not hand it back.
      if (this.ackedAbove.length > 2 * this.maxAckPending) this.ackedAbove = this.ackedAbove.filter((s) => s > lowest);
    }
    if (parseJsAckReply(reply)?.consumer !== consumer) this.skip.add(seq);
    return reply;
  }

  /** The server's floor, when higher than the one known here and the client holds nothing. */
  raiseFloor(floor: number): void {
    if (floor > this.highestAcked && this.pending.size === 0) this.highestAcked = floor;
  }

  /** A successor consumer starts at the floor: what the client acknowledged above it is not sent twice. */
  skipAcknowledgedAbove(): void {
    for (const seq of this.acknowledged().above) this.skip.add(seq);
  }

  /**
   * How far the client has acknowledged: everything up to `floor` (in the order received),
   * and `above` it what it acknowledged out of order.
   */
  acknowledged(): { floor: number; above: number[] } {
    const lowest = this.pending.keys().next().value;
    if (lowest === undefined) return { floor: this.highestAcked, above: [] };
    return { floor: lowest - 1, above: this.ackedAbove.filter((s) => s > lowest) };
  }
}
