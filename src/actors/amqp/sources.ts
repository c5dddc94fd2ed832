/**
 * Where a receiving link's messages come from (mapping-to-nats.md "AMQP addresses",
 * CONTRACT "Formats the documents leave open"): a live core NATS subscription, a
 * consumer the gateway makes on the stream that stores the source, or an operator's
 * queue. Pure rules; docs/decisions/amqp-links.md has the reasoning.
 */

import { createHash } from "node:crypto";
import type { ConsumerInfo } from "@nats-io/jetstream";
import type { LinkError } from "../../machines/amqpLink.js";
import type { SourceAddress } from "../../protocol/amqpAddress.js";
import { err, ok, type Result } from "../../protocol/result.js";
import { patternCovers } from "../../protocol/subjects.js";
import type { Coverage } from "../bindings.js";
import { limitReached } from "../client/jetStreamLimits.js";

/** snd-settle-mode as the client's receiver asked for it (part 2, 2.8.2): unsettled, settled or mixed. */
export type SettleMode = 0 | 1 | 2;

export type SourcePlan =
  /** `settled`: sent presettled; otherwise unsettled but live only (nothing is redelivered). */
  | { readonly kind: "core"; readonly subject: string; readonly settled: boolean }
  /** A consumer the gateway creates on the stream and deletes when the link goes. */
  | { readonly kind: "stream"; readonly subject: string; readonly stream: string }
  /** A durable subscription (docs/decisions/amqp-durable.md): a named consumer kept across detaches. */
  | {
      readonly kind: "durable";
      readonly subject: string;
      readonly stream: string;
      readonly consumer: string;
      readonly settled: boolean;
    }
  | {
      readonly kind: "queue";
      readonly subject: string;
      readonly stream: string;
      readonly consumer: string;
      readonly settled: boolean;
    };

const notImplemented = (description: string): LinkError => ({ condition: "amqp:not-implemented", description });
const notFound = (description: string): LinkError => ({ condition: "amqp:not-found", description });
const precondition = (description: string): LinkError => ({ condition: "amqp:precondition-failed", description });

/**
 * Mixed mode lets the gateway choose per link: unsettled where it can redeliver or is
 * asked for an exact address, presettled where CONTRACT would refuse an unsettled receiver.
 */
export function planSource(
  address: Exclude<SourceAddress, { kind: "dynamic" }>,
  mode: SettleMode,
  coverage: (source: string) => Coverage,
  /** The consumer name when the source asks for a durable terminus (durableSource). */
  durable?: string,
): Result<SourcePlan, LinkError> {
  const where = coverage(address.subject);
  // An operator queue is durable already: it is read as a queue.
  if (durable !== undefined && address.kind !== "queue") {
    if (where.kind === "stored")
      return ok({
        kind: "durable",
        subject: address.subject,
        stream: where.stream.stream,
        consumer: durable,
        settled: mode === 1,
      });
    const why = where.kind === "mixed" ? where.reason : `no binding stores the whole source ${address.subject}`;
    return err(
      notImplemented(
        `${why}; a durable subscription is kept in a stream, so it needs a stored address (or drop durable / expiry-policy never)`,
      ),
    );
  }
  if (address.kind === "queue") {
    if (where.kind === "unstored")
      return err(notFound(`no bound stream stores ${address.subject}, so it has no queue ${address.queue}`));
    if (where.kind === "mixed")
      return err(precondition(`${where.reason}: a queue lives on the one stream that stores its address`));
    return ok({
      kind: "queue",
      subject: address.subject,
      stream: where.stream.stream,
      consumer: address.queue,
      settled: mode === 1,
    });
  }
  if (mode === 1) return ok({ kind: "core", subject: address.subject, settled: true });
  if (where.kind === "stored") return ok({ kind: "stream", subject: address.subject, stream: where.stream.stream });
  if (address.kind === "subject" && where.kind === "unstored")
    return ok({ kind: "core", subject: address.subject, settled: false });
  if (mode === 2) return ok({ kind: "core", subject: address.subject, settled: true });
  const why = where.kind === "mixed" ? where.reason : `no binding covers the whole source ${address.subject}`;
  return err(
    notImplemented(
      `${why}; an unsettled receiver needs one stream covering its source (ask for presettled delivery instead)`,
    ),
  );
}

/**
 * An operator queue must be a pull consumer with explicit acks and no max_bytes, whose
 * filter subjects all lie inside the address (so the queue delivers nothing else).
 */
export function queueProblem(
  info: ConsumerInfo,
  address: string,
  streamSubjects: readonly string[],
): LinkError | undefined {
  const c = info.config;
  if (c.deliver_subject)
    return notImplemented(`queue ${info.name} is a push consumer; the gateway reads pull consumers`);
  if (c.ack_policy !== "explicit")
    return notImplemented(`queue ${info.name} has ack policy ${c.ack_policy}; the gateway needs explicit acks`);
  if (c.max_bytes !== undefined && c.max_bytes > 0)
    return precondition(`queue ${info.name} has max_bytes ${c.max_bytes}; the gateway pulls by message count`);
  const filters = c.filter_subjects?.length
    ? c.filter_subjects
    : c.filter_subject
      ? [c.filter_subject]
      : streamSubjects;
  const outside = filters.find((f) => !patternCovers(address, f));
  if (outside !== undefined) return precondition(`queue ${info.name} reads ${outside}, which is not inside ${address}`);
  return undefined;
}

/** The answer to a JetStream API error while looking a queue up, as a link condition. */
export function consumerLookupError(e: unknown, stream: string, consumer: string): LinkError {
  const code = (e as { api_error?: { err_code?: number } }).api_error?.err_code ?? (e as { code?: number }).code;
  const message = e instanceof Error ? e.message : String(e);
  // 10014 consumer not found, 10059 stream not found (nats-server's JSApiError codes).
  if (code === 10014 || code === 10059 || /not found/i.test(message))
    return notFound(`queue ${consumer} does not exist on stream ${stream}`);
  if (/permissions violation/i.test(message))
    return {
      condition: "amqp:unauthorized-access",
      description: `not authorized to read queue ${consumer}: ${message}`,
    };
  const limit = limitReached(e, stream);
  if (limit) return { condition: "amqp:resource-limit-exceeded", description: limit };
  return { condition: "amqp:internal-error", description: `could not look up queue ${consumer}: ${message}` };
}

/** A source terminus as rhea reads it from the client's attach. */
export interface SourceTerminus {
  readonly address?: string | null;
  readonly dynamic?: boolean;
  readonly durable?: number;
  readonly expiry_policy?: string;
}

/**
 * A durable subscription (JMS durable subscriber, Qpid Proton DurableSubscription): a
 * source that is durable (configuration or unsettled-state) and never expires. A durable
 * terminus with another expiry policy ends with the link, the session or the connection
 * at the latest, so the gateway serves it as an ordinary source and answers durable none.
 */
export function durableSource(source: SourceTerminus | null | undefined): boolean {
  return (source?.durable ?? 0) > 0 && source?.expiry_policy === "never";
}

/**
 * The JetStream consumer of a durable subscription: one per client container-id and link
 * name (JMS: client id and subscription name), hashed into a valid consumer name.
 */
export function durableConsumerName(containerId: string, linkName: string): string {
  const h = createHash("sha256").update(containerId).update("\u0000").update(linkName).digest("hex");
  return `mqgw-amqp-${h.slice(0, 24)}`;
}
