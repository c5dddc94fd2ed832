import { createHash } from "node:crypto";
import { AckPolicy, DeliverPolicy } from "@nats-io/jetstream";
import type { Msg, NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "../../log.js";
import { parseJsAckReply } from "../../protocol/jsAckReply.js";
import type { AccountServices } from "../accountServices.js";
import { ACK, nakAfter, settle } from "../client/jetStreamPull.js";
import { PullWindow } from "./pullWindow.js";

/**
 * A QoS 1/2 subscription of a persistent session on stored subjects reads a durable
 * consumer of that session (one per session and filter, kept across reconnects while the
 * session lives), so what the client did not acknowledge is delivered again when it comes
 * back, in the order it was stored [MQTT-4.6.0-2..3].
 *
 * A consumer that is resumed (the session's previous connection ended, here or on another
 * gateway, cleanly or not) is reset to its ack floor first (`$JS.API.CONSUMER.RESET`,
 * nats-server 2.14+): the server forgets what it delivered and still waits for, and hands
 * everything above the floor back in stream order. What the client had acknowledged above
 * the floor (the session record keeps it) is acknowledged again without being sent, and
 * what it held unacknowledged goes out with its old packet id and DUP (outbound.ts).
 */
// Pull requests of a few seconds: an idle consumer asks again this often.
const PULL_EXPIRES_MS = 3_000;
// nats-server keeps a request whose inbox went for a moment when gateways or leafnodes are on (defaultGatewayRecentSubExpiration).
const HAND_BACK_DELAY_MS = 300;

// What is handed back waits this long: made once.
const HAND_BACK = nakAfter(HAND_BACK_DELAY_MS);

export interface OpenOptions {
  readonly services: AccountServices;
  readonly account: string;
  readonly stream: string;
  readonly name: string;
  readonly subjects: readonly string[];
  readonly maxAckPending: number;
  /** The session's expiry: the server removes the consumer when nobody read it that long. */
  readonly inactiveMs: number;
  /** A message to deliver, with its stream sequence. */
  readonly onMessage: (m: Msg, seq: number, delivery: StoredDelivery) => void;
  /**
   * The session is resumed: hand back from the ack floor, skipping what the client
   * acknowledged above it (`ackedAbove`, from the session record).
   */
  readonly resume?: { readonly ackedAbove: readonly number[] } | undefined;
  readonly log?: Logger | undefined;
}

export class StoredDelivery {
  /** What was received and not yet acknowledged, by stream sequence, in the order received. */
  private readonly pending = new Map<number, Msg>();
  /** Sequences acknowledged while a lower one was still pending: a reset hands those back too. */
  private ackedAbove: number[] = [];
  private readonly skip: Set<number>;
  /** Reads the consumer until the session stops it. */
  private window: PullWindow | undefined;

  private constructor(
    private readonly nc: NatsConnection,
    readonly name: string,
    private readonly maxAckPending: number,
    private readonly onMessage: OpenOptions["onMessage"],
    skip: readonly number[],
  ) {
    this.skip = new Set(skip);
  }

  /**
   * The consumer of one filter of one session; the epoch makes every fresh session's names
   * its own (a session saved before epochs existed has none: its names are by filter alone).
   */
  static consumerName(account: string, clientId: string, filter: string, epoch: string | undefined): string {
    const key = epoch === undefined ? `${account}\u0000${clientId}\u0000${filter}` : `${account}\u0000${clientId}\u0000${filter}\u0000${epoch}`;
    return `mqgw-${createHash("sha256").update(key).digest("hex").slice(0, 24)}`;
  }

  static async open(options: OpenOptions): Promise<StoredDelivery> {
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
    const existed = await jsm.consumers
      .info(options.stream, options.name)
      .then(() => jsm.consumers.update(options.stream, options.name, { max_ack_pending: config.max_ack_pending, inactive_threshold: config.inactive_threshold }))
      .then(
        () => true,
        () => false,
      );
    if (!existed) await jsm.consumers.add(options.stream, config);
    if (existed && options.resume) await resetDelivery(lease.nc, options.stream, options.name, options.log);
    const delivery = new StoredDelivery(lease.nc, options.name, options.maxAckPending, options.onMessage, options.resume?.ackedAbove ?? []);
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
    const seq = parseJsAckReply(m.reply)?.streamSeq;
    if (seq === undefined) return;
    if (!this.window) return this.settle(m, HAND_BACK);
    if (this.pending.has(seq)) {
      // ack_wait ran out while the client holds it: MQTT sends nothing twice on one
      // connection [MQTT-4.4.0-1]; the newest delivery's reply is the one to acknowledge.
      this.pending.set(seq, m);
      return;
    }
    if (this.skip.delete(seq)) return this.settle(m, ACK);
    this.pending.set(seq, m);
    this.onMessage(m, seq, this);
  }

  /** The client took the message over (PUBACK / PUBREC), or it is not the client's to have. */
  ack(seq: number): void {
    const m = this.pending.get(seq);
    if (!m) return;
    this.pending.delete(seq);
    const lowest = this.pending.keys().next().value;
    if (lowest !== undefined && lowest < seq) {
      this.ackedAbove.push(seq);
      // Below the lowest pending, a sequence is under the floor: a reset does not hand it back.
      if (this.ackedAbove.length > 2 * this.maxAckPending) this.ackedAbove = this.ackedAbove.filter((s) => s > lowest);
    }
    this.settle(m, ACK);
  }

  /** What a reset would hand back that the client already has: the session record keeps it. */
  acknowledgedAboveFloor(): number[] {
    const lowest = this.pending.keys().next().value;
    if (lowest === undefined) return [];
    return this.ackedAbove.filter((s) => s > lowest);
  }

  /**
   * Stop reading. What the client still holds stays for the next connection's reset; on a
   * server without reset it is handed back now (a NAK, delayed past the short while a
   * clustered server keeps the stopped requests), so a resumed session gets it at once.
   */
  stop(): void {
    const window = this.window;
    this.window = undefined;
    window?.stop();
    for (const m of this.pending.values()) this.settle(m, HAND_BACK);
    this.pending.clear();
  }

  private settle(m: Msg, body: Uint8Array): void {
    settle(this.nc, m.reply!, body);
  }

  static async remove(services: AccountServices, account: string, stream: string, name: string): Promise<void> {
    const { jsm } = await services.jetstream(account);
    await jsm.consumers.delete(stream, name).catch(() => false);
  }
}

/**
 * `$JS.API.CONSUMER.RESET.<stream>.<consumer>` (nats-server 2.14+, ADR-60), empty body:
 * the consumer forgets what it delivered and still waits for (pending, redelivery counts),
 * keeps the stream ack floor, and delivers again from just above it, in stream order. Done
 * only when the consumer's previous reader has stopped (the session machine resumes a
 * session once its previous connection let go). An older server (no responders) or an
 * error leaves what was held to come back after the NAK delay or ack_wait, out of order
 * with newer messages (docs/decisions/mqtt-sessions.md).
 */
async function resetDelivery(nc: NatsConnection, stream: string, name: string, log: Logger | undefined): Promise<void> {
  try {
    const r = await nc.request(`$JS.API.CONSUMER.RESET.${stream}.${name}`, undefined, { timeout: 5_000 });
    const v = r.json<{ error?: { description?: string } }>();
    if (v.error) throw new Error(v.error.description ?? "JetStream error");
  } catch (e) {
    log?.warn({ stream, consumer: name, err: (e as Error).message }, "consumer reset failed; held deliveries come back after ack_wait, maybe out of order");
  }
}
