import { createHash } from "node:crypto";
import { AckPolicy, DeliverPolicy } from "@nats-io/jetstream";
import type { Msg, NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "../../log.js";
import type { AccountServices } from "../accountServices.js";
import { PullWindow } from "./pullWindow.js";

/**
 * A QoS 1/2 subscription on a stored subject reads a durable consumer of the session
 * (one per session and filter, kept across reconnects while the session lives), so what
 * the client did not acknowledge is delivered again after it comes back.
 */
// Short requests bound how long a returning client waits for what it left unacknowledged.
const PULL_EXPIRES_MS = 3_000;

// The acknowledgement bodies, encoded once (JetStream AckExplicit: one per message).
const ACK = new TextEncoder().encode("+ACK");
const encoder = new TextEncoder();

export class StoredDelivery {
  private readonly pending = new Set<Msg>();
  private stopped = false;
  private window: PullWindow | undefined;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly onMessage: (m: Msg, delivery: StoredDelivery) => void,
  ) {}

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
    onMessage: (m: Msg, delivery: StoredDelivery) => void;
    /**
     * The session's last holder is known dead (its gateway did not answer, or this
     * gateway's id held it before a restart): what it held unacknowledged is handed
     * back now instead of after ack_wait (resetDelivery).
     */
    ownerGone?: boolean;
    log?: Logger;
  }): Promise<StoredDelivery> {
    const { jsm, lease } = await options.services.jetstream(options.account);
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
    const delivery = new StoredDelivery(lease.nc, options.onMessage);
    // Pulled with overlapping requests rather than `consume()`: when the client goes, the
    // open requests are drained, not abandoned, so nothing the server sends lands in an
    // inbox nobody reads (which would hold it until ack_wait).
    const window = new PullWindow(lease.nc, options.stream, options.name, Math.min(options.maxAckPending, 256), PULL_EXPIRES_MS, (m) =>
      delivery.received(m),
    );
    delivery.window = window;
    window.start();
    return delivery;
  }

  private received(m: Msg): void {
    if (this.stopped) this.nak(m, this.afterRequest());
    else {
      this.pending.add(m);
      this.onMessage(m, this);
    }
  }

  ack(m: Msg): void {
    if (this.pending.delete(m)) this.settle(m, ACK);
  }

  /** Stop reading; what the client still holds comes back at once on the next attach. */
  stop(): void {
    this.stopped = true;
    this.window?.stop();
    const delay = this.afterRequest();
    for (const m of this.pending) this.nak(m, delay);
    this.pending.clear();
  }

  private nak(m: Msg, delayMs: number): void {
    this.settle(m, encoder.encode(`-NAK {"delay":${delayMs * 1_000_000}}`));
  }

  private settle(m: Msg, body: Uint8Array): void {
    try {
      this.nc.publish(m.reply!, body);
    } catch {
      // The connection is closed: the message comes back after ack_wait.
    }
  }

  /**
   * A message handed back must not go to a request still open for a client that left
   * (it would bounce back and forth until the request expires): redeliver it just after.
   */
  private afterRequest(): number {
    return Math.max(0, (this.window?.lastEndsAt ?? 0) - Date.now()) + 50;
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
