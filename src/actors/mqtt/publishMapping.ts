import type { MsgHdrs } from "@nats-io/transport-node";
import { Reason } from "../../protocol/mqttReasons.js";
import { bareHeaders, type InboundPublish, mqttPublishToNats, type PublishContext } from "../../protocol/mqttToNats.js";
import { fixedNatsHeaders } from "../client/headerCache.js";
import type { ClientLink } from "./link.js";

/** A publish as NATS gets it: shared between the bare publishes of one topic (`lastBare`), so only read. */
export interface Mapped {
  readonly subject: string;
  readonly reply: string | undefined;
  readonly pairs: Array<[string, string]> | undefined;
}

/** Why a publish was refused, counted already; the publisher answers it (CONTRACT). */
export interface MappingRefusal {
  readonly reasonCode: number;
  readonly reason: string;
}

/**
 * One client's PUBLISH -> NATS subject, reply and header pairs (mqttToNats.ts), with what
 * stays the same between its messages kept: the mapping's context, the last bare publish's
 * mapping, and the bare header block encoded once (docs/performance.md, issue 16).
 */
export class PublishMapping {
  /** The mapping's context, one per client: only `now` and `markClientId` change between messages. */
  private ctx: { -readonly [K in keyof PublishContext]: PublishContext[K] } | undefined;
  /** The publish options of a bare publish, its header block encoded once; nats.js only sets their `reply` to "". */
  private bareOptions: { headers: MsgHdrs } | undefined;
  /**
   * The last bare publish's mapping (QoS 0, no RETAIN, no properties): a device publishes
   * to the same topic again and again, and a bare publish's mapping depends on nothing
   * else but the link's settings (fixed for its life) and whether it names its client.
   * Only a mapping that was accepted is kept.
   */
  private lastBare: { topic: string; mapped: Mapped } | undefined;

  constructor(private readonly link: ClientLink) {}

  map(inbound: InboundPublish): Mapped | MappingRefusal {
    const { link } = this;
    const ctx = (this.ctx ??= {
      protocolVersion: link.version,
      clientId: link.clientId,
      routes: link.settings.routes,
      routeList: link.settings.routeList,
      maxSubjectBytes: link.settings.maxSubjectBytes,
      now: 0,
      markClientId: true,
      bareHeaders: bareHeaders(link.clientId),
    });
    ctx.markClientId = link.settings.clientIdHeaderAlways || link.noLocal.count > 0;
    const bare = inbound.qos === 0 && !inbound.retain && inbound.properties === undefined;
    const last = this.lastBare;
    // Its pairs say whether it named its client: the bare headers, or none.
    if (bare && last?.topic === inbound.topic && last.mapped.pairs === (ctx.markClientId ? ctx.bareHeaders : undefined))
      return last.mapped;
    if (tooManyLevels(inbound.topic, link.settings.maxTopicLevels)) {
      link.metrics.refused("mqtt", "too_many_levels");
      return {
        reasonCode: Reason.topicNameInvalid,
        reason: `topic has more than ${link.settings.maxTopicLevels} levels`,
      };
    }
    ctx.now = Date.now();
    const mapped = mqttPublishToNats(inbound, ctx);
    if (!mapped.ok) {
      link.metrics.refused("mqtt", reasonLabel(mapped.error.reasonCode));
      return mapped.error;
    }
    const { subject, reply } = mapped.value;
    // Header pairs, made into MsgHdrs only where needed: a stored publish encodes them itself.
    const out: Mapped = { subject, reply, pairs: mapped.value.headers };
    if (bare) this.lastBare = { topic: inbound.topic, mapped: out };
    return out;
  }

  /** The publish options for `pairs` when they are the client's bare headers (encoded once); otherwise undefined. */
  bareOptionsFor(pairs: Array<[string, string]> | undefined): { headers: MsgHdrs } | undefined {
    if (pairs === undefined || pairs !== this.ctx?.bareHeaders) return undefined;
    return (this.bareOptions ??= { headers: fixedNatsHeaders(pairs) });
  }
}

/** limits.max_topic_levels: a deep topic costs every subscription match on the server. */
export function tooManyLevels(topic: string, max: number): boolean {
  if (max <= 0) return false;
  let levels = 1;
  for (let i = 0; i < topic.length; i++) if (topic.charCodeAt(i) === 47 && ++levels > max) return true;
  return false;
}

/** The refusal's label in mqgw_refused_total. */
export function reasonLabel(code: number): string {
  switch (code) {
    case Reason.topicNameInvalid:
    case Reason.topicFilterInvalid:
      return "bad_topic";
    case Reason.notAuthorized:
      return "not_authorized";
    case Reason.implementationSpecific:
      return "route_property_missing";
    case Reason.payloadFormatInvalid:
      return "payload_format_invalid";
    default:
      return `reason_0x${code.toString(16)}`;
  }
}
