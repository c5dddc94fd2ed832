import { createHash } from "node:crypto";
import { AckPolicy, type ConsumerMessages, DeliverPolicy, type JsMsg } from "@nats-io/jetstream";
import type { AccountServices } from "../accountServices.js";

/**
 * A QoS 1/2 subscription on a stored subject reads a durable consumer of the session
 * (one per session and filter, kept across reconnects while the session lives), so what
 * the client did not acknowledge is delivered again after it comes back.
 */
export class StoredDelivery {
  private readonly pending = new Set<JsMsg>();
  private stopped = false;

  private constructor(private readonly messages: ConsumerMessages) {}

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
    let delivery: StoredDelivery | undefined;
    const early: JsMsg[] = [];
    const messages = await consumer.consume({
      max_messages: Math.min(options.maxAckPending, 256),
      callback: (m) => {
        // A pull answered after stop() must not go to a client that is gone: hand it back at once.
        if (delivery?.stopped) m.nak();
        else if (!delivery) early.push(m);
        else {
          delivery.pending.add(m);
          options.onMessage(m, delivery);
        }
      },
    });
    delivery = new StoredDelivery(messages);
    for (const m of early) {
      delivery.pending.add(m);
      options.onMessage(m, delivery);
    }
    return delivery;
  }

  ack(m: JsMsg): void {
    if (this.pending.delete(m)) m.ack();
  }

  /** Stop reading; what the client still holds comes back at once on the next attach. */
  stop(): void {
    this.stopped = true;
    void this.messages.close();
    for (const m of this.pending) m.nak();
    this.pending.clear();
  }

  static async remove(services: AccountServices, account: string, stream: string, name: string): Promise<void> {
    const { jsm } = await services.jetstream(account);
    await jsm.consumers.delete(stream, name).catch(() => false);
  }
}
