import { createHash, randomBytes } from "node:crypto";
import { AckPolicy, DeliverPolicy } from "@nats-io/jetstream";
import type { Msg, NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "../../log.js";
import { parseJsAckReply } from "../../protocol/jsAckReply.js";
import type { AccountServices } from "../accountServices.js";
import { ACK, settle } from "../client/jetStreamPull.js";
import { type PullBudget, PullWindow } from "./pullWindow.js";
import type { StoredSubscription } from "./sessionStore.js";

/**
 * A QoS 1/2 subscription of a persistent session on stored subjects reads a durable
 * consumer of that session, kept across reconnects while the session lives, so what the
 * client did not acknowledge is delivered again when it comes back, in the order it was
 * stored [MQTT-4.6.0-2..3].
 *
 * Each connection that resumes the session reads a consumer of its own: it creates one
 * that starts just above what the previous one had acknowledged in order (the higher of
 * the server's ack floor and the session record's), then deletes the previous one. The
 * stream keeps the session's messages throughout (interest retention sees a consumer at
 * every moment), everything above the floor comes in stream order, and nothing of the
 * previous connection (its pull requests still open on the server, messages on their way
 * to it) can reach or delay the new one. What the client acknowledged above the floor (the
 * record keeps it) is acknowledged again without being sent, and what it held
 * unacknowledged goes out with its old packet id and DUP (outbound.ts). Works the same on
 * every nats-server 2.10+.
 */
// Pull requests of a few seconds: an idle consumer asks again this often.
const PULL_EXPIRES_MS = 3_000;

export interface OpenOptions {
  readonly services: AccountServices;
  readonly account: string;
  readonly stream: string;
  /** The consumer to create (a fresh subscription), or to take over from (a resume). */
  readonly name: string;
  /** A new name for the consumer a resume creates. */
  readonly renamed: () => string;
  readonly subjects: readonly string[];
  readonly maxAckPending: number;
  /** The session's expiry: the server removes the consumer when nobody read it that long. */
  readonly inactiveMs: number;
  /** A message to deliver, with its stream sequence. */
  readonly onMessage: (m: Msg, seq: number, delivery: StoredDelivery) => void;
  /**
   * The session is resumed: read on from what was acknowledged in order (`floor`, as the
   * record has it; 0 when unknown), skipping what was acknowledged above it.
   */
  readonly resume?: { readonly floor: number; readonly above: readonly number[] } | undefined;
  readonly log?: Logger | undefined;
  /** The client's bytes: the pull pauses while they are at their bound (pullWindow.ts). */
  readonly budget?: PullBudget | undefined;
}

export class StoredDelivery {
  /**
   * What was received and not yet acknowledged: each one's ack subject by stream sequence, in
   * the order received (not the message: its payload would stay until the client's PUBACK).
   */
  private readonly pending = new Map<number, string>();
  /** Sequences acknowledged while a lower one was still pending. */
  private ackedAbove: number[] = [];
  /** The highest sequence acknowledged so far (with the floor it started from). */
  private highestAcked: number;
  private readonly skip: Set<number>;
  /** Reads the consumer until the session stops it. */
  private window: PullWindow | undefined;

  private constructor(
    private readonly nc: NatsConnection,
    /** The consumer this delivery reads. */
    readonly name: string,
    private readonly maxAckPending: number,
    private readonly onMessage: OpenOptions["onMessage"],
    floor: number,
    skip: readonly number[],
  ) {
    this.highestAcked = floor;
    this.skip = new Set(skip);
  }

  /**
   * The consumers of one filter of one session are named from (account, client id, filter,
   * epoch) and a suffix per connection that made one; the epoch makes every fresh
   * session's names its own (a session saved before epochs existed has none).
   */
  static consumerName(account: string, clientId: string, filter: string, epoch: string | undefined): string {
    const key =
      epoch === undefined
        ? `${account}\u0000${clientId}\u0000${filter}`
        : `${account}\u0000${clientId}\u0000${filter}\u0000${epoch}`;
    const base = `mqgw-${createHash("sha256").update(key).digest("hex").slice(0, 24)}`;
    return epoch === undefined ? base : `${base}-${randomBytes(4).toString("hex")}`;
  }

  /** A stored subscription's consumer: named in its record, or, in a record from before epochs, by filter alone. */
  static recordedConsumer(s: StoredSubscription, account: string, clientId: string, epoch: string | undefined): string {
    return s.consumer ?? StoredDelivery.consumerName(account, clientId, s.subscription.topic, epoch);
  }

  static async open(options: OpenOptions): Promise<StoredDelivery> {
    const { jsm, lease } = await options.services.jetstream(options.account);
    const config = {
      ack_policy: AckPolicy.Explicit,
      filter_subjects: [...options.subjects],
      max_ack_pending: options.maxAckPending,
      ack_wait: 30_000_000_000,
      inactive_threshold: Math.max(60_000, options.inactiveMs) * 1_000_000,
    };
    let name = options.name;
    let floor = 0;
    if (options.resume) {
      // The server's floor may lag the previous connection's last acks; the record's may be
      // missing (a gateway that died wrote none): the higher of the two.
      const previous = await jsm.consumers.info(options.stream, options.name).catch(() => undefined);
      floor = Math.max(previous?.ack_floor.stream_seq ?? 0, options.resume.floor);
      if (previous || floor > 0) {
        name = options.renamed();
        await jsm.consumers.add(options.stream, {
          ...config,
          durable_name: name,
          deliver_policy: DeliverPolicy.StartSequence,
          opt_start_seq: floor + 1,
        });
        if (previous) await jsm.consumers.delete(options.stream, options.name).catch(() => false);
      } else
        await jsm.consumers.add(options.stream, { ...config, durable_name: name, deliver_policy: DeliverPolicy.New });
    } else {
      await jsm.consumers.add(options.stream, { ...config, durable_name: name, deliver_policy: DeliverPolicy.New });
    }
    const delivery = new StoredDelivery(
      lease.nc,
      name,
      options.maxAckPending,
      options.onMessage,
      floor,
      options.resume?.above ?? [],
    );
    // Pulled with overlapping requests (pullWindow.ts) rather than `consume()`.
    const window = new PullWindow(
      lease.nc,
      options.stream,
      name,
      Math.min(options.maxAckPending, 256),
      PULL_EXPIRES_MS,
      (m) => delivery.received(m),
      options.budget,
    );
    delivery.window = window;
    window.start();
    return delivery;
  }

  private received(m: Msg): void {
    const seq = parseJsAckReply(m.reply)?.streamSeq;
    if (seq === undefined) return;
    // Stopped: left for the next connection's consumer, which reads on from the floor.
    if (!this.window) return;
    if (this.pending.has(seq)) {
      // ack_wait ran out while the client holds it: MQTT sends nothing twice on one
      // connection [MQTT-4.4.0-1]; the newest delivery's reply is the one to acknowledge.
      this.pending.set(seq, m.reply!);
      return;
    }
    if (this.skip.delete(seq)) return this.settle(m.reply!, ACK);
    this.pending.set(seq, m.reply!);
    this.onMessage(m, seq, this);
  }

  /** The client took the message over (PUBACK / PUBREC), or it is not the client's to have. */
  ack(seq: number): void {
    const reply = this.pending.get(seq);
    if (reply === undefined) return;
    this.pending.delete(seq);
    if (seq > this.highestAcked) this.highestAcked = seq;
    const lowest = this.pending.keys().next().value;
    if (lowest !== undefined && lowest < seq) {
      this.ackedAbove.push(seq);
      // Below the lowest pending, a sequence is under the floor: a reset does not hand it back.
      if (this.ackedAbove.length > 2 * this.maxAckPending) this.ackedAbove = this.ackedAbove.filter((s) => s > lowest);
    }
    this.settle(reply, ACK);
  }

  /**
   * How far the client has acknowledged: everything up to `floor` (in the order received),
   * and `above` it what it acknowledged out of order. The session record keeps both for the
   * next connection's consumer.
   */
  acknowledged(): { floor: number; above: number[] } {
    const lowest = this.pending.keys().next().value;
    if (lowest === undefined) return { floor: this.highestAcked, above: [] };
    return { floor: lowest - 1, above: this.ackedAbove.filter((s) => s > lowest) };
  }

  /** Stop reading: what the client still holds is read again by the next connection's consumer. */
  stop(): void {
    const window = this.window;
    this.window = undefined;
    window?.stop();
    this.pending.clear();
  }

  private settle(reply: string, body: Uint8Array): void {
    settle(this.nc, reply, body);
  }

  static async remove(services: AccountServices, account: string, stream: string, name: string): Promise<void> {
    const { jsm } = await services.jetstream(account);
    await jsm.consumers.delete(stream, name).catch(() => false);
  }
}
