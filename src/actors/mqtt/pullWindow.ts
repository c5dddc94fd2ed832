import { createInbox, type Msg, type NatsConnection, type Subscription } from "@nats-io/transport-node";

/**
 * Pull requests of a durable pull consumer that overlap, on one inbox subscription read
 * by callback (docs/performance.md, QoS 1). `consumer.fetch` asked for the next batch only
 * after the previous one was iterated, so the consumer idled a round trip per batch; here
 * the next request goes out as soon as half of what was asked for has arrived, so the
 * server always holds a waiting request while messages flow. At most `window` messages
 * are asked for and not yet delivered; the consumer's max_ack_pending still bounds what
 * the client holds unacknowledged.
 *
 * The server serves waiting requests first come, first served, and requests with the same
 * expiry end in the order they were made: a delivered message counts against the oldest
 * open request, and an end-of-request status (408 expired, 409) ends the oldest one. A
 * request whose end never came (NATS reconnected meanwhile) is dropped a second after its
 * expiry.
 */
const GRACE_MS = 1_000;
const RETRY_MS = 1_000;
const encoder = new TextEncoder();

interface OpenRequest {
  remaining: number;
  readonly endsAt: number;
}

export class PullWindow {
  private readonly inbox = createInbox();
  private readonly subject: string;
  private readonly open: OpenRequest[] = [];
  private outstanding = 0;
  private sub: Subscription | undefined;
  private retryAt = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;

  constructor(
    private readonly nc: NatsConnection,
    stream: string,
    consumer: string,
    private readonly window: number,
    private readonly expiresMs: number,
    private readonly onMessage: (m: Msg) => void,
  ) {
    this.subject = `$JS.API.CONSUMER.MSG.NEXT.${stream}.${consumer}`;
  }

  start(): void {
    this.sub = this.nc.subscribe(this.inbox, { callback: (e, m) => (e ? this.failed() : this.received(m)) });
    this.refill();
  }

  /**
   * No more requests, and the inbox goes at once: the server drops a waiting request whose
   * inbox nobody reads before it would send to it (consumer.go, interest check), so the
   * session's next connection, here or elsewhere, is not queued behind requests of one
   * that left. What was already on its way is handed back by the next connection's reset.
   */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.sub?.unsubscribe();
    this.sub = undefined;
  }

  private received(m: Msg): void {
    if (m.reply) {
      const head = this.open[0];
      if (head && --head.remaining === 0) this.open.shift();
      if (this.outstanding > 0) this.outstanding--;
      this.onMessage(m);
    } else {
      // A status without a reply: 408 the request expired, 409 it ended (consumer deleted,
      // limits), 404 nothing to send; anything but an expiry waits before asking again.
      const code = m.headers?.code ?? 0;
      if (code === 100) return; // an idle heartbeat (not asked for) ends nothing
      const head = this.open.shift();
      if (head) this.outstanding -= head.remaining;
      if (code !== 408 && code !== 404) this.retryAt = Date.now() + RETRY_MS;
    }
    this.refill();
  }

  private failed(): void {
    // The subscription ended (permissions, connection closed): start over later.
    this.sub = undefined;
    this.open.length = 0;
    this.outstanding = 0;
    this.retryAt = Date.now() + RETRY_MS;
    this.schedule(RETRY_MS);
  }

  /** Asks for more when at most half of the window is still asked for. */
  private refill(): void {
    if (this.stopped) return;
    const now = Date.now();
    while (this.open.length > 0 && this.open[0]!.endsAt + GRACE_MS <= now) this.outstanding -= this.open.shift()!.remaining;
    if (now < this.retryAt) return this.schedule(this.retryAt - now);
    if (this.outstanding * 2 > this.window) return;
    const batch = this.window - this.outstanding;
    try {
      this.sub ??= this.nc.subscribe(this.inbox, { callback: (e, m) => (e ? this.failed() : this.received(m)) });
      const endsAt = now + this.expiresMs;
      this.nc.publish(this.subject, encoder.encode(`{"batch":${batch},"expires":${this.expiresMs * 1_000_000}}`), { reply: this.inbox });
      this.open.push({ remaining: batch, endsAt });
      this.outstanding += batch;
      this.schedule(this.expiresMs + GRACE_MS);
    } catch {
      // The connection is closed or draining: try again later.
      this.retryAt = now + RETRY_MS;
      this.schedule(RETRY_MS);
    }
  }

  /** Wakes the window when nothing else would: a request's end that never came, a retry. */
  private schedule(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.refill();
    }, ms);
    this.timer.unref();
  }
}
