import type { Msg } from "@nats-io/transport-node";
import { storedDeliverable } from "../../protocol/deliveryGuard.js";
import { parseJsAckReply } from "../../protocol/jsAckReply.js";
import { ACK, type JetStreamPull, NAK, nakAfter, type PullReader, TERM, WPI } from "../client/jetStreamPull.js";
import type { NatsSeam } from "../client/natsSeam.js";
import type { ActorRegistry } from "../registry.js";
import type { Feed, FeedSink, Outcome, Pending } from "./feed.js";

export interface JetStreamFeedOptions {
  readonly nats: NatsSeam;
  readonly stream: string;
  readonly consumer: string;
  /** The link's source address: a delivery on a subject outside it is never offered (deliveryGuard.ts). */
  readonly source: string;
  readonly sink: FeedSink;
  /** How long one pull waits for messages. */
  readonly expiresMs: number;
  /** The consumer's ack wait: held messages are kept from redelivery well within it. */
  readonly ackWaitMs: number;
  /**
   * Other links read this consumer too (an operator's queue): what this link passes over
   * (its filter, or undeliverable-here) goes back for them instead of being acked or
   * terminated (docs/decisions/amqp-filters.md).
   */
  readonly shared?: boolean;
  readonly registry?: ActorRegistry | undefined;
}

/**
 * AMQP part 3, 3.4, on a consumer only this link reads: released and modified
 * delivery-failed mean "try again" (JetStream counts the delivery either way), rejected
 * "never" (TERM, as RabbitMQ discards or dead-letters it), undeliverable-here "not to this
 * link", which is never again on the link's own consumer, and a message the filter
 * passed over is done for this link: the stream keeps it for everyone else.
 */
const ACK_BODY: Record<Outcome, Uint8Array> = {
  accepted: ACK,
  rejected: TERM,
  released: NAK,
  failed: NAK,
  undeliverable: TERM,
  skipped: ACK,
};

/** Stream sequences a link on a shared queue keeps refusing (undeliverable-here), oldest forgotten first. */
const NOT_HERE_MAX = 10_000;

/**
 * How long a message a link on a shared queue passed over waits before the queue offers
 * it again: doubling with each pass up to a second, so a message no receiver takes costs
 * at most one delivery a second, and jittered (x0.5 to x1.5): JetStream hands redeliveries
 * to waiting pulls in turn, and two messages passed over at the same moment by two links
 * would otherwise come back to the same wrong links again and again.
 */
export const passDelayMs = (redeliveries: number, random = Math.random()): number =>
  Math.round(Math.min(1_000, 50 * 2 ** Math.min(redeliveries, 5)) * (0.5 + random));

/** How often a message was delivered before this time, from its ack subject. */
export function redeliveriesOf(ackSubject: string): number {
  const delivered = parseJsAckReply(ackSubject)?.delivered ?? 1;
  return delivered - 1;
}

/**
 * A JetStream pull consumer read exactly as far as the client's credit (the shared pull
 * engine, actors/client/jetStreamPull.ts, asked with a minimum batch of 1: a receiver
 * granting 1 holds 1 message). What the link holds is kept from redelivery (+WPI) and
 * goes back to the stream when the link goes.
 */
class JetStreamFeed implements Feed, PullReader {
  /** Messages pulled and not yet settled: the link's queue and the client's unsettled deliveries. */
  private readonly held = new Set<Pending>();
  /** On a shared queue: stream sequences the client said are undeliverable on this link. */
  private readonly notHere = new Set<number>();
  private readonly pull: JetStreamPull;
  private readonly keepAlive: ReturnType<typeof setInterval>;

  constructor(private readonly o: JetStreamFeedOptions) {
    this.pull = o.nats.pull({
      stream: o.stream,
      consumer: o.consumer,
      reader: this,
      expiresMs: o.expiresMs,
      onGone: "end",
      registry: o.registry,
    });
    // A message the client holds longer than the ack wait would be sent again to someone; +WPI restarts its clock.
    this.keepAlive = setInterval(
      () => {
        for (const m of this.held) if (m.ack) this.o.nats.settle(m.ack.subject, WPI);
      },
      Math.max(1_000, Math.floor(o.ackWaitMs / 3)),
    );
    this.keepAlive.unref();
  }

  want(n: number): void {
    this.pull.want(n);
  }

  drain(n: number): Promise<void> {
    return this.pull.drain(n);
  }

  settle(m: Pending, outcome: Outcome, reason?: string): void {
    if (!this.held.delete(m) || !m.ack) return;
    if (outcome === "rejected" && reason !== undefined) {
      // The client's error goes with the TERM: JetStream's MSG_TERMINATED advisory carries it as the reason.
      this.o.nats.settle(m.ack.subject, new TextEncoder().encode(`+TERM ${reason}`));
      return;
    }
    if (this.o.shared && (outcome === "skipped" || outcome === "undeliverable")) {
      // Not acked away from the other receivers: back to the queue, and kept from this link.
      if (outcome === "undeliverable") this.refuseHere(m.ack.subject);
      this.o.nats.settle(m.ack.subject, nakAfter(passDelayMs(m.ack.redeliveries)));
      return;
    }
    this.o.nats.settle(m.ack.subject, ACK_BODY[outcome]);
  }

  private refuseHere(ackSubject: string): void {
    const seq = parseJsAckReply(ackSubject)?.streamSeq;
    if (seq === undefined) return;
    this.notHere.add(seq);
    if (this.notHere.size > NOT_HERE_MAX) this.notHere.delete(this.notHere.values().next().value!);
  }

  hold(): void {
    this.pull.hold();
  }

  close(): void {
    clearInterval(this.keepAlive);
    this.pull.stop();
    for (const m of this.held) if (m.ack) this.o.nats.settle(m.ack.subject, NAK);
    this.held.clear();
  }

  // -- the engine's reader ------------------------------------------------------------

  message(m: Msg): void {
    const reply = m.reply ?? "";
    if (!storedDeliverable([this.o.source], m.subject)) {
      // Only an operator queue whose filter changed after attach delivers outside its
      // address: not the client's to read, and not ours to drop; JetStream offers it again later.
      this.o.nats.settle(reply, new TextEncoder().encode(`-NAK {"delay":${this.o.ackWaitMs * 1_000_000}}`));
      return;
    }
    const redeliveries = redeliveriesOf(reply);
    if (this.notHere.size > 0) {
      const seq = parseJsAckReply(reply)?.streamSeq;
      if (seq !== undefined && this.notHere.has(seq)) {
        // The client said not here: the queue's other receivers get it.
        this.o.nats.settle(reply, nakAfter(passDelayMs(redeliveries)));
        this.o.sink.refill();
        return;
      }
    }
    const pending: Pending = {
      subject: m.subject,
      headers: m.headers,
      data: m.data,
      // The NATS reply of a stored message is its ack subject; its reply-to is in Mqgw-Reply-To only.
      reply: undefined,
      ack: { subject: reply, redeliveries },
    };
    this.held.add(pending);
    this.o.sink.offer(pending);
  }

  refill(): void {
    this.o.sink.refill();
  }

  gone(reason: string): void {
    this.o.sink.fault({
      condition: "amqp:resource-deleted",
      description: `queue ${this.o.consumer} on stream ${this.o.stream} is gone (${reason})`,
    });
  }
}

export function jetStreamFeed(o: JetStreamFeedOptions): Feed {
  return new JetStreamFeed(o);
}
