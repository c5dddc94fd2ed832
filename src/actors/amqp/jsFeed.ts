import type { Msg, NatsConnection, Subscription } from "@nats-io/transport-node";
import { storedDeliverable } from "../../protocol/deliveryGuard.js";
import { inboxOf } from "../natsBridge.js";
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
}

interface Pull {
  readonly started: number;
  readonly noWait: boolean;
  remaining: number;
  readonly sub: Subscription;
  readonly timer: NodeJS.Timeout;
  readonly ended: () => void;
}

const RENEW_PAUSE_MS = 1_000;

/** AMQP part 3, 3.4: what each outcome asks of the stream. Released means "try again"; rejected, "never". */
const ACK_BODY: Record<Outcome, string> = {
  accepted: "+ACK",
  rejected: "+TERM",
  released: "-NAK",
  failed: "-NAK",
  undeliverable: "+TERM",
};

/** `$JS.ACK.<stream>.<consumer>.<delivered>...` (v1) or with domain and account hash first (v2). */
export function redeliveriesOf(ackSubject: string): number {
  const t = ackSubject.split(".");
  const delivered = Number(t.length === 9 ? t[4] : t.length >= 11 ? t[6] : 1);
  return Number.isFinite(delivered) && delivered > 1 ? delivered - 1 : 0;
}

/**
 * A JetStream pull consumer read exactly as far as the client's credit: each pull asks
 * for the credit not yet asked for, so a receiver granting 1 holds 1 message. Pulls are
 * made by hand on core NATS (each with its own inbox) because a drain needs a `no_wait`
 * pull and exact accounting of what each pull still owes.
 */
class JetStreamFeed implements Feed {
  private readonly pulls = new Set<Pull>();
  /** Messages pulled and not yet settled: the link's queue and the client's unsettled deliveries. */
  private readonly held = new Set<Pending>();
  private requested = 0;
  private holding = false;
  private closed = false;
  private readonly api: string;
  private readonly keepAlive: NodeJS.Timeout;

  constructor(private readonly o: JetStreamFeedOptions) {
    this.api = `$JS.API.CONSUMER.MSG.NEXT.${o.stream}.${o.consumer}`;
    // A message the client holds longer than the ack wait would be sent again to someone; +WPI restarts its clock.
    this.keepAlive = setInterval(
      () => {
        for (const m of this.held) if (m.ack) this.o.nc.publish(m.ack.subject, "+WPI");
      },
      Math.max(1_000, Math.floor(o.ackWaitMs / 3)),
    );
    this.keepAlive.unref();
  }

  want(n: number): void {
    this.holding = false;
    const more = n - this.requested;
    if (more > 0 && !this.closed) this.pull(more, false);
  }

  drain(n: number): Promise<void> {
    const more = n - this.requested;
    // Pulls that already cover the credit would have been served had anything been there.
    if (more <= 0 || this.closed || this.holding) return Promise.resolve();
    return this.pull(more, true);
  }

  settle(m: Pending, outcome: Outcome): void {
    if (!this.held.delete(m) || !m.ack) return;
    this.o.nc.publish(m.ack.subject, ACK_BODY[outcome]);
  }

  hold(): void {
    // Pulls made before NATS went away may be gone with it: forget them, ask again when it is back.
    this.holding = true;
    for (const p of [...this.pulls]) this.end(p);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.keepAlive);
    for (const p of [...this.pulls]) this.end(p);
    for (const m of this.held) if (m.ack) this.o.nc.publish(m.ack.subject, "-NAK");
    this.held.clear();
  }

  private pull(batch: number, noWait: boolean): Promise<void> {
    return new Promise((resolve) => {
      // The client connection's gateway inbox (_INBOX.MQGW.<id>): never delivered to a client subscription.
      const inbox = inboxOf(this.o.nc);
      const pull: Pull = {
        started: Date.now(),
        noWait,
        remaining: batch,
        sub: this.o.nc.subscribe(inbox, { callback: (e, m) => (e ? this.end(pull) : this.onMessage(pull, m)) }),
        // The server ends a pull with 408 at its expiry; this covers one that never says so.
        timer: setTimeout(() => this.end(pull), (noWait ? 5_000 : this.o.expiresMs) + 5_000),
        ended: resolve,
      };
      pull.timer.unref();
      this.pulls.add(pull);
      this.requested += batch;
      const request = noWait ? { batch, no_wait: true } : { batch, expires: this.o.expiresMs * 1_000_000 };
      this.o.nc.publish(this.api, JSON.stringify(request), { reply: inbox });
    });
  }

  private onMessage(pull: Pull, m: Msg): void {
    const status = m.headers?.code ?? 0;
    if (!m.reply) {
      this.onStatus(pull, status, m.headers?.description ?? "");
      return;
    }
    pull.remaining--;
    this.requested--;
    if (!storedDeliverable([this.o.source], m.subject)) {
      // Only an operator queue whose filter changed after attach delivers outside its
      // address: not the client's to read, and not ours to drop; JetStream offers it again later.
      this.o.nc.publish(m.reply, `-NAK {"delay":${this.o.ackWaitMs * 1_000_000}}`);
      if (pull.remaining <= 0) this.end(pull);
      return;
    }
    const pending: Pending = {
      subject: m.subject,
      headers: m.headers,
      data: m.data,
      // The NATS reply of a stored message is its ack subject; its reply-to is in Mqgw-Reply-To only.
      reply: undefined,
      ack: { subject: m.reply, redeliveries: redeliveriesOf(m.reply) },
    };
    if (this.closed) {
      this.o.nc.publish(m.reply, "-NAK");
      return;
    }
    this.held.add(pending);
    if (pull.remaining <= 0) this.end(pull);
    this.o.sink.offer(pending);
  }

  private onStatus(pull: Pull, code: number, description: string): void {
    // 100: heartbeat or flow control. 404/408: the pull is over. 409: over, for a reason.
    if (code === 100 || code === 0) return;
    this.end(pull);
    if (code === 409 && /deleted|push based/i.test(description)) this.gone(`${code} ${description}`);
    // No responders: a deleted consumer, or a restarted nats-server whose JetStream has not
    // loaded it yet (the pull is renewed after a pause meanwhile). Only JetStream can tell.
    else if (code === 503) void this.checkGone();
  }

  private checking = false;

  private async checkGone(): Promise<void> {
    if (this.checking || this.closed) return;
    this.checking = true;
    try {
      const r = await this.o.nc.request(`$JS.API.CONSUMER.INFO.${this.o.stream}.${this.o.consumer}`, "", {
        timeout: 2_000,
      });
      const code = r.json<{ error?: { err_code?: number; description?: string } }>().error;
      // 10014 consumer not found, 10059 stream not found.
      if (code && (code.err_code === 10014 || code.err_code === 10059))
        this.gone(`${code.err_code} ${code.description ?? ""}`);
    } catch {
      // JetStream not answering yet: not known gone; the renewed pull asks again.
    } finally {
      this.checking = false;
    }
  }

  private gone(why: string): void {
    if (this.closed) return;
    this.o.sink.fault({
      condition: "amqp:resource-deleted",
      description: `queue ${this.o.consumer} on stream ${this.o.stream} is gone (${why})`,
    });
  }

  private end(pull: Pull): void {
    if (!this.pulls.delete(pull)) return;
    clearTimeout(pull.timer);
    const unfilled = Math.max(0, pull.remaining);
    this.requested -= unfilled;
    pull.remaining = 0;
    pull.sub.unsubscribe();
    pull.ended();
    // A long poll that ran out is renewed; one the server cut short at once (409) is renewed after a pause.
    if (this.closed || this.holding || pull.noWait || unfilled === 0) return;
    const quick = Date.now() - pull.started < RENEW_PAUSE_MS;
    if (!quick) {
      this.o.sink.refill();
      return;
    }
    const t = setTimeout(() => this.o.sink.refill(), RENEW_PAUSE_MS);
    t.unref();
  }
}

export function jetStreamFeed(o: JetStreamFeedOptions): Feed {
  return new JetStreamFeed(o);
}
