import { createHash } from "node:crypto";
import { AckPolicy, type Consumer, type ConsumerMessages, DeliverPolicy, type JsMsg } from "@nats-io/jetstream";
import type { AccountServices } from "../accountServices.js";

/**
 * A QoS 1/2 subscription on a stored subject reads a durable consumer of the session
 * (one per session and filter, kept across reconnects while the session lives), so what
 * the client did not acknowledge is delivered again after it comes back.
 */
// Short requests bound how long a returning client waits for what it left unacknowledged.
const PULL_EXPIRES_MS = 3_000;

export class StoredDelivery {
  private readonly pending = new Set<JsMsg>();
  private stopped = false;
  /** When the open pull request expires: until then the server may still send to it. */
  private requestEndsAt = 0;

  private constructor(private readonly onMessage: (m: JsMsg, delivery: StoredDelivery) => void) {}

  static consumerName(account: string, clientId: string, filter: string): string {
    return `mqgw-${createHash("sha256").update(`${account}\u0000${clientId}\u0000${filter}`).digest("hex").slice(0, 24)}`;
  }

  static async open(options: {
    services: AccountServices;
    account: string;
    stream: string;
    name: string;
    subjects: readonly string[];
    maxAckPending: number;
    /** The session's expiry: the server removes the consumer when nobody read it that long. */
    inactiveMs: number;
    onMessage: (m: JsMsg, delivery: StoredDelivery) => void;
  }): Promise<StoredDelivery> {
    const { js, jsm } = await options.services.jetstream(options.account);
    const config = {
      durable_name: options.name,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.New,
      filter_subjects: [...options.subjects],
      max_ack_pending: options.maxAckPending,
      ack_wait: 30_000_000_000,
      inactive_threshold: Math.max(60_000, options.inactiveMs) * 1_000_000,
    };
    try {
      await jsm.consumers.info(options.stream, options.name);
      await jsm.consumers.update(options.stream, options.name, {
        max_ack_pending: config.max_ack_pending,
        inactive_threshold: config.inactive_threshold,
      });
    } catch {
      await jsm.consumers.add(options.stream, config);
    }
    const consumer = await js.consumers.get(options.stream, options.name);
    const delivery = new StoredDelivery(options.onMessage);
    void delivery.pull(consumer, Math.min(options.maxAckPending, 256));
    return delivery;
  }

  /**
   * Pulls in bounded requests (fetch with an expiry) rather than `consume()`: when the
   * client goes, the open request is drained, not abandoned, so nothing the server sends
   * lands in an inbox nobody reads (which would hold it until ack_wait).
   */
  private async pull(consumer: Consumer, batch: number): Promise<void> {
    while (!this.stopped) {
      let messages: ConsumerMessages;
      try {
        this.requestEndsAt = Date.now() + PULL_EXPIRES_MS;
        messages = await consumer.fetch({ max_messages: batch, expires: PULL_EXPIRES_MS });
      } catch {
        if (this.stopped) return;
        await new Promise((r) => setTimeout(r, 1_000).unref());
        continue;
      }
      try {
        for await (const m of messages) {
          if (this.stopped) m.nak(this.afterRequest());
          else {
            this.pending.add(m);
            this.onMessage(m, this);
          }
        }
      } catch {
        // The request ended early (consumer gone, NATS down): ask again.
      }
    }
  }

  ack(m: JsMsg): void {
    if (this.pending.delete(m)) m.ack();
  }

  /** Stop reading; what the client still holds comes back at once on the next attach. */
  stop(): void {
    this.stopped = true;
    const delay = this.afterRequest();
    for (const m of this.pending) m.nak(delay);
    this.pending.clear();
  }

  /**
   * A message handed back must not go to the request still open for a client that left
   * (it would bounce back and forth until the request expires): redeliver it just after.
   */
  private afterRequest(): number {
    return Math.max(0, this.requestEndsAt - Date.now()) + 50;
  }

  static async remove(services: AccountServices, account: string, stream: string, name: string): Promise<void> {
    const { jsm } = await services.jetstream(account);
    await jsm.consumers.delete(stream, name).catch(() => false);
  }
}
