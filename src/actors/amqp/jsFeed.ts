import type { Msg, NatsConnection } from "@nats-io/transport-node";
import { storedDeliverable } from "../../protocol/deliveryGuard.js";
import { parseJsAckReply } from "../../protocol/jsAckReply.js";
import { ACK, JetStreamPull, NAK, type PullReader, settle, TERM, WPI } from "../client/jetStreamPull.js";
import type { ActorRegistry } from "../registry.js";
import type { Feed, FeedSink, Outcome, Pending } from "./feed.js";

export interface JetStreamFeedOptions {
  readonly nc: NatsConnection;
  readonly stream: string;
  readonly consumer: string;
  /** The link's source address: a delivery on a subject outside it is never offered (deliveryGuard.ts). */
  readonly source: string;
  readonly sink: FeedSink;
  /** How long one pull waits for messages. */
  readonly expiresMs: number;
  /** The consumer's ack wait: held messages are kept from redelivery well within it. */
  readonly ackWaitMs: number;
  readonly registry?: ActorRegistry | undefined;
}

/** AMQP part 3, 3.4: what each outcome asks of the stream. Released means "try again"; rejected, "never". */
const ACK_BODY: Record<Outcome, Uint8Array> = {
  accepted: ACK,
  rejected: TERM,
  released: NAK,
  failed: NAK,
  undeliverable: TERM,
};

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
  private readonly pull: JetStreamPull;
  private readonly keepAlive: ReturnType<typeof setInterval>;

  constructor(private readonly o: JetStreamFeedOptions) {
    this.pull = new JetStreamPull({
      nc: o.nc,
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
        for (const m of this.held) if (m.ack) settle(this.o.nc, m.ack.subject, WPI);
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

  settle(m: Pending, outcome: Outcome): void {
    if (!this.held.delete(m) || !m.ack) return;
    settle(this.o.nc, m.ack.subject, ACK_BODY[outcome]);
  }

  hold(): void {
    this.pull.hold();
  }

  close(): void {
    clearInterval(this.keepAlive);
    this.pull.stop();
    for (const m of this.held) if (m.ack) settle(this.o.nc, m.ack.subject, NAK);
    this.held.clear();
  }

  // -- the engine's reader ------------------------------------------------------------

  message(m: Msg): void {
    const reply = m.reply ?? "";
    if (!storedDeliverable([this.o.source], m.subject)) {
      // Only an operator queue whose filter changed after attach delivers outside its
      // address: not the client's to read, and not ours to drop; JetStream offers it again later.
      settle(this.o.nc, reply, new TextEncoder().encode(`-NAK {"delay":${this.o.ackWaitMs * 1_000_000}}`));
      return;
    }
    const pending: Pending = {
      subject: m.subject,
      headers: m.headers,
      data: m.data,
      // The NATS reply of a stored message is its ack subject; its reply-to is in Mqgw-Reply-To only.
      reply: undefined,
      ack: { subject: reply, redeliveries: redeliveriesOf(reply) },
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
