import { createHash } from "node:crypto";
import { AckPolicy, type Consumer, type ConsumerMessages, DeliverPolicy, type JsMsg } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "../../log.js";
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
    /**
     * The session's last holder is known dead (its gateway did not answer, or this
     * gateway's id held it before a restart): what it held unacknowledged is handed
     * back now instead of after ack_wait (resetDelivery).
     */
    ownerGone?: boolean;
    log?: Logger;
  }): Promise<StoredDelivery> {
    const { js, jsm, lease } = await options.services.jetstream(options.account);
    const config = {
      durable_name: options.name,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.New,
      filter_subjects: [...options.subjects],
      max_ack_pending: options.maxAckPending,
      ack_wait: 30_000_000_000,
      inactive_threshold: Math.max(60_000, options.inactiveMs) * 1_000_000,
    };
    let held = 0;
    try {
      held = (await jsm.consumers.info(options.stream, options.name)).num_ack_pending;
      await jsm.consumers.update(options.stream, options.name, {
        max_ack_pending: config.max_ack_pending,
        inactive_threshold: config.inactive_threshold,
      });
    } catch {
      await jsm.consumers.add(options.stream, config);
    }
    if (options.ownerGone && held > 0) await resetDelivery(lease.nc, options.stream, options.name, held, options.log);
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

/**
 * `$JS.API.CONSUMER.RESET.<stream>.<consumer>` (nats-server 2.14+, ADR-60), empty body:
 * the consumer forgets what it delivered and still waits for (pending, redelivery
 * counts), keeps the stream ack floor, and delivers again from just above it. Only for a
 * consumer whose reader is dead: a live one would see its in-flight messages delivered
 * twice. What was acknowledged above the floor (out of order) is delivered again too,
 * which QoS 1/2 allows. An older server (no responders) or an error leaves the messages
 * to come back after ack_wait, as before (docs/decisions/faults.md).
 */
async function resetDelivery(nc: NatsConnection, stream: string, name: string, held: number, log: Logger | undefined): Promise<void> {
  try {
    const r = await nc.request(`$JS.API.CONSUMER.RESET.${stream}.${name}`, undefined, { timeout: 5_000 });
    const v = r.json<{ error?: { description?: string } }>();
    if (v.error) throw new Error(v.error.description ?? "JetStream error");
    log?.info({ stream, consumer: name, held }, "stored deliveries of a dead session holder handed back (consumer reset)");
  } catch (e) {
    log?.warn({ stream, consumer: name, held, err: (e as Error).message }, "consumer reset failed; held deliveries come back after ack_wait");
  }
}
