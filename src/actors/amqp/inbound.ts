/**
 * One message an AMQP client sent -> the NATS message the gateway publishes, or the
 * refusal the client gets (mapping-to-nats.md "Message bodies", "Headers", "Routes";
 * CONTRACT "Error answers"). Pure: the link actor decides what a refusal means for a
 * settled or unsettled delivery.
 */
import { classifyTarget, validateRelayTo } from "../../protocol/amqpAddress.js";
import {
  bodyToPayload,
  headPropertiesWithTrace,
  headSection,
  type MessageSections,
  plainDataPayload,
  Section,
  splitMessage,
} from "../../protocol/amqpBody.js";
import { isTyped, messageIdToBytes, messageIdToText } from "../../protocol/amqpValue.js";
import { isGatewayOwn } from "../../protocol/deliveryGuard.js";
import { type MessageMeta, metaToHeaders } from "../../protocol/headers.js";
import type { Route } from "../../protocol/mqttToNats.js";
import { publishSubjectProblem } from "../../protocol/natsLimits.js";
import { err, ok, type Result } from "../../protocol/result.js";
import { buildSubject, firstDisagreement } from "../../protocol/route.js";

export interface InboundContext {
  /** The link's target subject; null for the anonymous relay, where each message's `to` names it. */
  readonly target: string | null;
  /** Presettled: Mqgw-QoS stays absent (0). */
  readonly settled: boolean;
  readonly containerId: string;
  readonly routes: ReadonlyMap<string, Route>;
  readonly routeList: readonly Route[];
  readonly now: number;
  /** Subject plus reply bytes that fit a NATS protocol line (natsLimits.ts); 0 or absent: no limit. */
  readonly maxSubjectBytes?: number;
}

export interface NatsMessage {
  readonly subject: string;
  readonly payload: Uint8Array;
  readonly headers: Array<[string, string]> | undefined;
  /** The reply-to as a core NATS reply subject (a stored publish keeps it only in Mqgw-Reply-To). */
  readonly reply: string | undefined;
  /** The sender's message-id as text: with the container-id it names the message for JetStream's duplicate check. */
  readonly messageId: string | undefined;
}

export interface Refusal {
  readonly condition: string;
  readonly description: string;
  /** The metrics label. */
  readonly reason: string;
}

/** AMQP 1.0 part 3, 3.2.4: the fields of the properties section, by position. */
const P = { messageId: 0, to: 2, subject: 3, replyTo: 4, correlationId: 5, contentType: 6, absoluteExpiry: 8 } as const;
/** Part 3, 3.2.1: header fields. */
const H = { ttl: 2 } as const;

function field(list: unknown, index: number): unknown {
  if (!isTyped(list) || !Array.isArray(list.value)) return undefined;
  const item: unknown = list.value[index];
  if (!isTyped(item) || item.type.typecode === 0x40) return undefined;
  return item;
}

const text = (v: unknown): string | undefined => (isTyped(v) && typeof v.value === "string" ? v.value : undefined);

function millis(v: unknown): number | undefined {
  if (!isTyped(v)) return undefined;
  const x = v.value instanceof Date ? v.value.getTime() : v.value;
  return typeof x === "number" && Number.isFinite(x) ? x : undefined;
}

const refusal = (condition: string, description: string, reason: string): Refusal => ({
  condition,
  description,
  reason,
});

export function amqpToNats(encoded: Uint8Array, ctx: InboundContext): Result<NatsMessage, Refusal> {
  // One data section and nothing else said: no sections to parse (amqpBody.ts plainDataPayload).
  const plain = plainDataPayload(encoded);
  const parts = plain ? ok<MessageSections>({ body: encoded }) : splitMessage(encoded);
  if (!parts.ok) return err(refusal("amqp:decode-error", parts.error, "decode_error"));
  const { head, body, footer } = parts.value;
  const properties = head ? headSection(head, Section.properties) : undefined;

  let subject: string;
  if (ctx.target !== null) subject = ctx.target;
  else {
    const to = validateRelayTo(text(field(properties, P.to)));
    if (!to.ok)
      return err(
        refusal(
          to.error.condition,
          to.error.description,
          to.error.condition === "amqp:unauthorized-access" ? "admin_subject" : "bad_address",
        ),
      );
    subject = to.value;
  }

  const appProps = head ? headPropertiesWithTrace(head) : [];
  const lookup = (name: string) => appProps.find(([k]) => k === name)?.[1];
  const route = ctx.routes.get(subject);
  if (route) {
    const built = buildSubject(route.template, lookup);
    if (!built.ok) {
      return err(
        refusal("amqp:precondition-failed", `route property missing: ${built.error.missing}`, "route_property_missing"),
      );
    }
    subject = built.value;
  } else {
    for (const r of ctx.routeList) {
      const name = firstDisagreement(r.template, subject, lookup);
      if (name !== undefined) {
        return err(
          refusal(
            "amqp:precondition-failed",
            `route property missing or disagreeing with ${subject}: ${name}`,
            "route_property_missing",
          ),
        );
      }
    }
  }

  const body_ = plain ? ok({ payload: plain, sections: false }) : bodyToPayload(body);
  if (!body_.ok) return err(refusal("amqp:decode-error", body_.error, "decode_error"));

  const replyTo = text(field(properties, P.replyTo));
  // Only a subject can be replied to on NATS; anything else would break a NATS service's reply.
  const reply = replyTo !== undefined && classifyTarget(replyTo, false).ok ? replyTo : undefined;
  if (replyTo !== undefined && isGatewayOwn(replyTo))
    return err(
      refusal(
        "amqp:unauthorized-access",
        `reply-to ${JSON.stringify(replyTo.slice(0, 80))} is reserved for the gateway`,
        "admin_subject",
      ),
    );
  // What NATS gets, routed or not, passes the door's checks: a route builds from the sender's values.
  const problem = publishSubjectProblem(subject, reply, ctx.maxSubjectBytes ?? 0, route !== undefined);
  if (problem)
    return err(
      problem.kind === "reserved"
        ? refusal("amqp:unauthorized-access", problem.reason, "admin_subject")
        : refusal("amqp:invalid-field", problem.reason, "bad_address"),
    );
  const messageId = messageIdToText(field(properties, P.messageId));
  const correlation = messageIdToBytes(field(properties, P.correlationId));
  const contentType = text(field(properties, P.contentType));
  const amqpSubject = text(field(properties, P.subject));
  const header = head ? headSection(head, Section.header) : undefined;
  const ttl = millis(field(header, H.ttl));
  const expiresAt = millis(field(properties, P.absoluteExpiry)) ?? (ttl !== undefined ? ctx.now + ttl : undefined);

  const meta: MessageMeta = {
    ...(ctx.settled ? {} : { qos: 1 as const }),
    ...(contentType !== undefined ? { contentType } : {}),
    ...(correlation !== undefined ? { correlationId: correlation } : {}),
    ...(reply !== undefined ? { replyTo: reply } : {}),
    ...(expiresAt !== undefined ? { expiresAt } : {}),
    ...(appProps.length > 0 ? { userProps: appProps } : {}),
    ...(messageId !== undefined ? { amqpMessageId: messageId } : {}),
    ...(amqpSubject !== undefined ? { amqpSubject } : {}),
    ...(ctx.containerId ? { amqpContainerId: ctx.containerId } : {}),
    ...(head ? { amqpHead: head } : {}),
    ...(body_.value.sections ? { amqpBody: "sections" as const } : {}),
    ...(footer ? { amqpFooter: footer } : {}),
  };
  // A plain message's metadata is only what the link says (Mqgw-QoS, the container): its headers repeat.
  const headers = plain ? plainHeaders(ctx.settled, ctx.containerId, meta) : metaToHeaders(meta);
  return ok({ subject, payload: body_.value.payload, headers, reply, messageId });
}

/** The header pairs of the last plain message's link settings (shared: the pairs are only read). */
let lastPlain: { settled: boolean; containerId: string; headers: NatsMessage["headers"] } | undefined;

function plainHeaders(settled: boolean, containerId: string, meta: MessageMeta): NatsMessage["headers"] {
  const last = lastPlain;
  if (last && last.settled === settled && last.containerId === containerId) return last.headers;
  const headers = metaToHeaders(meta);
  lastPlain = { settled, containerId, headers };
  return headers;
}
