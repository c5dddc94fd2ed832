import type { Msg } from "@nats-io/transport-node";
import type { JetStreamPull, PullReader } from "../client/jetStreamPull.js";
import type { NatsSeam } from "../client/natsSeam.js";

/**
 * Pull requests of a durable pull consumer that overlap (docs/performance.md, QoS 1): the
 * shared pull engine (actors/client/jetStreamPull.ts) asked for a window of `window`
 * messages, again as soon as half of it has arrived, so the server always holds a waiting
 * request while messages flow. `consumer.fetch` asked for the next batch only after the
 * previous one was iterated, and the consumer idled a round trip per batch. The consumer's
 * max_ack_pending still bounds what the client holds unacknowledged.
 *
 * Stopping ends every pull's inbox at once: the server drops a waiting request whose inbox
 * nobody reads before it would send to it (consumer.go, interest check), so the session's
 * next connection, here or elsewhere, is not queued behind requests of one that left. What
 * was already on its way is read again by the next connection's consumer (storedDelivery.ts).
 */
export class PullWindow implements PullReader {
  private readonly pull: JetStreamPull;
  /** About how large this consumer's messages are (a running mean), to ask for what fits. */
  private typical = 0;
  private stopWaking: (() => void) | undefined;

  constructor(
    nats: NatsSeam,
    stream: string,
    consumer: string,
    private readonly window: number,
    expiresMs: number,
    private readonly onMessage: (m: Msg) => void,
    /** The consumer is gone (deleted, lost with a node): the stored delivery makes another from its floor. */
    private readonly onGone: (reason: string) => void,
    private budget?: PullBudget | undefined,
    /** A pinned consumer's priority group (pinnedTakeover.ts). */
    group?: string | undefined,
  ) {
    this.pull = nats.pull({
      stream,
      consumer,
      reader: this,
      expiresMs,
      // Half a window, of the window that fits the client's bytes now (ask()).
      minBatch: budget ? 1 : Math.ceil(window / 2),
      onGone: "end",
      group,
    });
  }

  /** The server pinned this reader: every pull of it names the pin. */
  get pinned(): boolean {
    return this.pull.pinned;
  }

  gone(reason: string): void {
    this.onGone(reason);
  }

  start(): void {
    if (this.budget) this.stopWaking = this.budget.onDrain(() => this.ask());
    this.ask();
  }

  stop(): void {
    this.stopWaking?.();
    this.pull.stop();
  }

  /**
   * Parked: nothing more is asked for; the pulls under way stay, so what they bring comes
   * here (not to an inbox nobody reads, which a `#` subscriber would keep alive), and
   * their pin id keeps the consumer this reader's.
   */
  pause(): void {
    this.stopWaking?.();
    this.stopWaking = undefined;
    this.budget = NOTHING;
  }

  /** Adopted by a connection: asks again, within its bytes, with the pin it kept. */
  readOn(budget: PullBudget | undefined): void {
    this.budget = budget;
    if (budget) this.stopWaking = budget.onDrain(() => this.ask());
    this.ask();
  }

  message(m: Msg): void {
    const size = m.data.byteLength;
    this.typical = this.typical === 0 ? size : this.typical + (size - this.typical) / 8;
    this.onMessage(m);
    this.ask();
  }

  refill(): void {
    this.ask();
  }

  /**
   * Asks for what the client's bytes leave room for, in messages of the typical size (a
   * guess of an eighth of the bound before the first); nothing while they are at the bound.
   * The drain of the client's socket asks again. The messages not asked for stay in the stream.
   */
  private ask(): void {
    const budget = this.budget;
    if (!budget) return this.pull.want(this.window);
    const n = budget.room(this.typical || budget.limit / 8, this.window);
    if (n > 0 && (this.pull.asked === 0 || n - this.pull.asked >= Math.ceil(n / 2))) this.pull.want(n);
  }
}

/** A parked subscription's budget: room for nothing, so nothing more is asked for. */
const NOTHING: PullBudget = { limit: 1, room: () => 0, onDrain: () => () => {} };

/** The bytes held for the client (clientBytes.ts) as a pull sees them. */
export interface PullBudget {
  readonly limit: number;
  /** Messages of about `typical` bytes that fit now, at most `most`; 0 at the bound. */
  room(typical: number, most: number): number;
  /** `wake` runs once the client's bytes went below the bound; the returned function stops that. */
  onDrain(wake: () => void): () => void;
}
