import { type JetStreamClient, jetstream } from "@nats-io/jetstream";
import { PermissionViolationError } from "@nats-io/transport-node";
import { toNatsHeaders } from "../client/natsHeaders.js";
import { RefusalTally } from "../client/refusalTally.js";
import type { Metrics } from "../metrics.js";
import type { NatsLease } from "../natsBridge.js";
import type { NatsMessage } from "./inbound.js";

/** What a publish came to, in AMQP terms: accepted, or rejected with a condition. */
export type Settlement =
  | { readonly ok: true }
  | { readonly ok: false; readonly condition: string; readonly description: string; readonly reason: string };

const ACCEPTED: Settlement = { ok: true };
const denied = (subject: string): Settlement => ({
  ok: false,
  condition: "amqp:unauthorized-access",
  description: `not authorized to publish to ${subject}`,
  reason: "not_authorized",
});

interface Waiting {
  readonly subject: string;
  readonly resolve: (s: Settlement) => void;
}

/**
 * Publishes one AMQP connection's messages on its client's NATS connection and tells
 * each delivery what became of it (CONTRACT: nothing is acknowledged that NATS did not
 * take, or, for stored subjects, the stream did not store).
 *
 * NATS answers a refused publish with `-ERR Permissions Violation`, and answers a PING
 * only after the -ERRs of everything published before it. So publishes wait for the
 * next flush, one per turn of the event loop for all of them, and each refusal the
 * server reported (counted per subject) rejects one publish to that subject.
 */
export class Publisher {
  private readonly refusals = new RefusalTally();
  private waiting: Waiting[] = [];
  private flushScheduled = false;
  private readonly js: JetStreamClient;
  private readonly unlisten: () => void;

  constructor(
    private readonly lease: NatsLease,
    private readonly metrics: Metrics,
    private readonly storedTimeoutMs: number,
  ) {
    this.js = jetstream(lease.nc, { timeout: storedTimeoutMs });
    this.unlisten = lease.onPermissionError((subject, op) => {
      if (op === "publish") this.refusals.add(subject);
    });
  }

  /** A core publish; settles once NATS has taken it or refused it. */
  publish(m: NatsMessage): Promise<Settlement> {
    try {
      this.lease.nc.publish(m.subject, m.payload, {
        ...(m.headers ? { headers: toNatsHeaders(m.headers) } : {}),
        ...(m.reply ? { reply: m.reply } : {}),
      });
    } catch (e) {
      return Promise.resolve(unpublishable(e));
    }
    return this.confirm(m.subject);
  }

  /**
   * A JetStream publish for a stored subject; accepted only on the stream's ack. The id
   * makes a client's resend of the same message (same container and message-id) one
   * stored message.
   */
  async store(m: NatsMessage, msgId: string): Promise<Settlement> {
    const started = performance.now();
    const published = this.js.publish(m.subject, m.payload, {
      msgID: msgId,
      timeout: this.storedTimeoutMs,
      ...(m.headers ? { headers: toNatsHeaders(m.headers) } : {}),
    });
    // Its -ERR, if NATS refuses it, must be counted off here and not charged to a core publish.
    const confirmed = this.confirm(m.subject);
    try {
      await published;
      this.metrics.jsAckLatency.observe((performance.now() - started) / 1000);
      await confirmed;
      return ACCEPTED;
    } catch (e) {
      const settled = await confirmed;
      // Only a refusal NATS itself reported is the client's fault. A flush that failed
      // (NATS down, reconnecting, closed) or a publish that timed out or found no
      // responders is the gateway's trouble: amqp:internal-error (CONTRACT error table).
      if (isPermissionError(e) || (!settled.ok && settled.reason === "not_authorized")) return denied(m.subject);
      if (isTooLarge(e)) return unpublishable(e);
      return {
        ok: false,
        condition: "amqp:internal-error",
        description: `not stored by JetStream: ${(e as Error).message}`,
        reason: "not_stored",
      };
    }
  }

  close(): void {
    this.unlisten();
    for (const w of this.waiting.splice(0))
      w.resolve({ ok: false, condition: "amqp:internal-error", description: "connection closed", reason: "closed" });
  }

  private confirm(subject: string): Promise<Settlement> {
    return new Promise((resolve) => {
      this.waiting.push({ subject, resolve });
      if (this.flushScheduled) return;
      this.flushScheduled = true;
      // Everything published in this turn rides on one PING.
      setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    const batch = this.waiting;
    this.waiting = [];
    if (batch.length === 0) return;
    this.lease.nc.flush().then(
      // The -ERRs reach the permission listener through nats.js's status stream; one more turn lets them land.
      () => setImmediate(() => this.settle(batch)),
      (e: Error) => {
        for (const w of batch)
          w.resolve({
            ok: false,
            condition: "amqp:internal-error",
            description: `NATS flush failed: ${e.message}`,
            reason: "flush_failed",
          });
      },
    );
  }

  private settle(batch: Waiting[]): void {
    for (const w of batch) {
      if (!this.refusals.delete(w.subject)) {
        w.resolve(ACCEPTED);
        continue;
      }
      this.metrics.refused("amqp", "not_authorized");
      w.resolve(denied(w.subject));
    }
  }
}

const isTooLarge = (e: unknown) => /max.?payload/i.test(String((e as Error)?.message ?? e));

/** nats.js refuses before sending: a message over max_payload, or a subject it cannot write. */
function unpublishable(e: unknown): Settlement {
  const description = e instanceof Error ? e.message : String(e);
  return isTooLarge(e)
    ? { ok: false, condition: "amqp:link:message-size-exceeded", description, reason: "message_too_large" }
    : { ok: false, condition: "amqp:invalid-field", description, reason: "bad_address" };
}

function isPermissionError(e: unknown): boolean {
  for (let c: unknown = e; c; c = (c as { cause?: unknown }).cause) {
    if (c instanceof PermissionViolationError) return true;
    if (/permissions violation/i.test(String((c as Error).message ?? ""))) return true;
  }
  return false;
}
