import { type MsgHdrs, PermissionViolationError } from "@nats-io/transport-node";
import { HeaderCache } from "../client/headerCache.js";
import type { NatsLease } from "../client/natsBridge.js";
import { headerBlock } from "../client/natsHeaders.js";
import { RefusalTally } from "../client/refusalTally.js";
import { AckInboxDenied } from "../client/storedPublisher.js";
import { keepCopy, writeStored } from "../client/storedWrite.js";
import type { MessageStore } from "../messageStore.js";
import type { Metrics } from "../metrics.js";
import type { NatsMessage } from "./inbound.js";

/** What a publish came to, in AMQP terms: accepted, or rejected with a condition. */
export type Settlement =
  | { readonly ok: true }
  | { readonly ok: false; readonly condition: string; readonly description: string; readonly reason: string };

const ACCEPTED: Settlement = { ok: true };
const denied = (subject: string, description = `not authorized to publish to ${subject}`): Settlement => ({
  ok: false,
  condition: "amqp:unauthorized-access",
  description,
  reason: "not_authorized",
});

/**
 * Publishes one AMQP connection's messages on its client's NATS connection and tells
 * each delivery what became of it (CONTRACT: nothing is acknowledged that NATS did not
 * take, or, for stored subjects, the stream did not store).
 *
 * NATS answers a refused publish with `-ERR Permissions Violation`, and answers a PING
 * only after the -ERRs of everything published before it. So publishes wait for the
 * seam's `confirm` (client/natsSeam.ts: one PING per turn of the event loop for every
 * publish on the connection, MQTT's too), and each refusal the server reported (counted
 * per subject) rejects one publish to that subject.
 */
export class Publisher {
  private readonly refusals = new RefusalTally();
  private readonly unlisten: () => void;
  /** The last header pairs published and their nats.js headers, encoded once: a link's messages mostly carry the same few. Made on first use. */
  private headers: HeaderCache | undefined;

  constructor(
    private readonly lease: NatsLease,
    private readonly account: string,
    private readonly messages: MessageStore,
    private readonly metrics: Metrics,
    private readonly storedTimeoutMs: number,
  ) {
    this.unlisten = lease.onPermissionError((subject, op) => {
      if (op === "publish") this.refusals.add(subject);
    });
  }

  /** A core publish; settles once NATS has taken it or refused it. */
  publish(m: NatsMessage): Promise<Settlement> {
    // Asked before the publish: its PING leaves in the publish's own write (natsSeam.ts `confirm`).
    const confirmed = this.lease.nats.confirm();
    try {
      this.lease.nats.publish(m.subject, m.payload, {
        ...(m.headers ? { headers: this.headersOf(m.headers) } : {}),
        ...(m.reply ? { reply: m.reply } : {}),
      });
    } catch (e) {
      confirmed.catch(() => {});
      return Promise.resolve(unpublishable(e));
    }
    return this.verdict(confirmed, m.subject);
  }

  /**
   * A JetStream publish for a stored subject, on the client's connection (its permissions
   * apply); accepted only on the stream's ack. `msgId` is the message's identity: unique,
   * or the sender's container and message-id when the operator asked for that
   * (amqp.dedupe_message_id), so a resend within the duplicate window is stored once.
   */
  async store(m: NatsMessage, msgId: string): Promise<Settlement> {
    // The stored-write step both doors take (client/storedWrite.ts): the raw publish on one
    // shared inbox, which it confirms first; one wait, no resend (no turn).
    const h = headerBlock(m.headers ?? [], msgId);
    const published = writeStored(
      this.lease.nats,
      this.metrics,
      m.subject,
      m.payload,
      h,
      undefined,
      this.storedTimeoutMs,
    );
    // Its -ERR, if NATS refuses it, must be counted off here and not charged to a core publish.
    const confirmed = this.verdict(this.lease.nats.confirm(), m.subject);
    try {
      await published;
      await confirmed;
      return ACCEPTED;
    } catch (e) {
      const settled = await confirmed;
      // Only a refusal NATS itself reported is the client's fault. A flush that failed
      // (NATS down, reconnecting, closed) or a publish that timed out or found no
      // responders is the gateway's trouble: amqp:internal-error (CONTRACT error table).
      if (e instanceof AckInboxDenied) return denied(m.subject, e.message);
      if (isPermissionError(e) || (!settled.ok && settled.reason === "not_authorized")) return denied(m.subject);
      if (isTooLarge(e)) return unpublishable(e);
      this.metrics.jetstreamError("amqp", "publish");
      return {
        ok: false,
        condition: "amqp:internal-error",
        description: `not stored by JetStream: ${(e as Error).message}`,
        reason: "not_stored",
      };
    }
  }

  /**
   * An unsettled message to a subject no binding stores (docs/decisions/mqtt-store.md): the
   * client's core publish, NATS's verdict on it, then the gateway's copy in the MQTT store
   * for MQTT sessions that are away. Accepted once both are done; a refused publish is not kept.
   */
  async keep(m: NatsMessage, msgId: string): Promise<Settlement> {
    const h = headerBlock(m.headers ?? [], msgId);
    const confirmed = this.lease.nats.confirm();
    try {
      this.lease.nats.publish(m.subject, m.payload, { headers: h, ...(m.reply ? { reply: m.reply } : {}) });
    } catch (e) {
      confirmed.catch(() => {});
      return unpublishable(e);
    }
    const published = await this.verdict(confirmed, m.subject);
    if (!published.ok) return published;
    try {
      await keepCopy(this.messages, this.metrics, this.account, m.subject, m.payload, h);
      return ACCEPTED;
    } catch (e) {
      return {
        ok: false,
        condition: "amqp:internal-error",
        description: `not kept by the MQTT store: ${(e as Error).message}`,
        reason: "not_stored",
      };
    }
  }

  /** A core publish's headers, through the link's HeaderCache (client/headerCache.ts). */
  private headersOf(pairs: ReadonlyArray<readonly [string, string]>): MsgHdrs {
    if (!this.headers) this.headers = new HeaderCache();
    return this.headers.headersOf(pairs);
  }

  close(): void {
    this.unlisten();
  }

  /**
   * NATS's verdict on the publish to `subject` that `confirmed` (the seam's `confirm`, asked
   * before it) vouches for: a refusal the server reported for that subject rejects it.
   */
  private verdict(confirmed: Promise<void>, subject: string): Promise<Settlement> {
    return confirmed.then(
      () => {
        if (!this.refusals.delete(subject)) return ACCEPTED;
        this.metrics.refused("amqp", "not_authorized");
        return denied(subject);
      },
      (e: Error) => ({
        ok: false,
        condition: "amqp:internal-error",
        description: `NATS flush failed: ${e.message}`,
        reason: "flush_failed",
      }),
    );
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
