import type { Msg, NatsConnection } from "@nats-io/transport-node";
import { JetStreamPull, type PullReader } from "../client/jetStreamPull.js";

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

  constructor(
    nc: NatsConnection,
    stream: string,
    consumer: string,
    private readonly window: number,
    expiresMs: number,
    private readonly onMessage: (m: Msg) => void,
    /** The consumer is gone (deleted, lost with a node): the stored delivery makes another from its floor. */
    private readonly onGone: (reason: string) => void,
  ) {
    this.pull = new JetStreamPull({
      nc,
      stream,
      consumer,
      reader: this,
      expiresMs,
      minBatch: Math.ceil(window / 2),
      onGone: "end",
    });
  }

  gone(reason: string): void {
    this.onGone(reason);
  }

  start(): void {
    this.pull.want(this.window);
  }

  stop(): void {
    this.pull.stop();
  }

  message(m: Msg): void {
    this.onMessage(m);
    this.pull.want(this.window);
  }

  refill(): void {
    this.pull.want(this.window);
  }
}
