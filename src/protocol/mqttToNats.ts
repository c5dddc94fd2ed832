import { isGatewayOwn } from "./deliveryGuard.js";
import { type MessageMeta, metaToHeaders } from "./headers.js";
import type { PublishProperties } from "./mqttProperties.js";
import { Reason } from "./mqttReasons.js";
import { publishSubjectProblem } from "./natsLimits.js";
import { err, ok, type Result } from "./result.js";
import { agreesWithProps, buildSubject, matchBuiltSubject, type RouteTemplate } from "./route.js";
import { publishTopicToSubject } from "./topic.js";

/** The MQTT 5 PUBLISH properties the mapping reads, User Properties in wire order (mqttProperties.ts). */
export type { PublishProperties };

export interface InboundPublish {
  readonly topic: string;
  readonly payload: Buffer;
  readonly qos: 0 | 1 | 2;
  readonly retain: boolean;
  readonly properties?: PublishProperties | undefined;
}

export interface Route {
  readonly subject: string;
  readonly template: RouteTemplate;
}

export interface PublishContext {
  readonly protocolVersion: 4 | 5;
  readonly clientId: string;
  /** Routes by the subject a client sends to. */
  readonly routes: ReadonlyMap<string, Route>;
  /** Every route, to check sends straight to a subject a template makes. */
  readonly routeList: readonly Route[];
  readonly now: number;
  /**
   * false: leave Mqgw-Mqtt-Client-Id out when no other header is written, so the message
   * goes as plain PUB. Only for a sender that holds no No Local subscription: No Local
   * compares this header with the receiving client's own id (docs/performance.md).
   */
  readonly markClientId?: boolean;
  /** Subject plus reply, in UTF-8 bytes, that fit a NATS protocol line (natsLimits.ts); 0 or absent: no limit. */
  readonly maxSubjectBytes?: number;
  /**
   * `bareHeaders(clientId)`, made once per client. Given, a bare publish (QoS 0, no RETAIN,
   * no properties) that carries Mqgw-Mqtt-Client-Id gets this very array as its headers,
   * so the caller can tell it by identity and reuse what it encoded of it: the block is
   * the same for every such message of a connection (docs/performance.md, issue 16).
   */
  readonly bareHeaders?: Array<[string, string]>;
}

export interface NatsPublish {
  readonly subject: string;
  readonly headers: Array<[string, string]> | undefined;
  /** Core NATS reply subject (the Response Topic as a subject). */
  readonly reply: string | undefined;
}

/** Why a publish is refused, with the v5 reason code the CONTRACT gives it. */
export interface Refusal {
  readonly reasonCode: number;
  readonly reason: string;
}

/** `$MQG.>` and `_INBOX.MQGW.>`: the gateway's own subjects, refused to clients (deliveryGuard.ts). */
export const isAdminSubject = isGatewayOwn;

/**
 * PUBLISH -> NATS message, or the refusal the client must get. Pure: the actor decides
 * what a refusal means for the QoS and protocol version at hand.
 */
export function mqttPublishToNats(p: InboundPublish, ctx: PublishContext): Result<NatsPublish, Refusal> {
  const mapped = publishTopicToSubject(p.topic);
  if (!mapped.ok) return err({ reasonCode: Reason.topicNameInvalid, reason: mapped.error });
  let subject = mapped.value;
  if (isAdminSubject(subject))
    return err({ reasonCode: Reason.notAuthorized, reason: "$MQG is reserved for the gateway" });

  const v5 = ctx.protocolVersion === 5;
  const props = v5 ? p.properties : undefined;
  const userProps = props?.userProperties ? userPropertyPairs(props.userProperties) : undefined;

  let routed = false;
  if (v5 && ctx.routeList.length > 0) {
    const lookup = (name: string) => userProps?.find(([k]) => k === name)?.[1];
    const route = ctx.routes.get(subject);
    if (route) {
      const built = buildSubject(route.template, lookup);
      if (!built.ok) {
        return err({
          reasonCode: Reason.implementationSpecific,
          reason: `route property missing: ${built.error.missing}`,
        });
      }
      subject = built.value;
      routed = true;
    } else {
      // A send straight to a subject a template makes must agree with its properties.
      for (const r of ctx.routeList) {
        const shape = matchBuiltSubject(r.template, subject);
        if (shape && !agreesWithProps(r.template, subject, lookup)) {
          return err({
            reasonCode: Reason.implementationSpecific,
            reason: `route property missing or disagreeing with ${subject}: ${Object.keys(shape).join(", ")}`,
          });
        }
      }
    }
  }

  if (props?.payloadFormatIndicator && !isUtf8(p.payload)) {
    return err({
      reasonCode: Reason.payloadFormatInvalid,
      reason: "payload is not UTF-8 but the payload format indicator says it is",
    });
  }

  let reply: string | undefined;
  if (props?.responseTopic !== undefined) {
    const r = publishTopicToSubject(props.responseTopic);
    if (!r.ok) return err({ reasonCode: Reason.topicNameInvalid, reason: `response topic: ${r.error}` });
    reply = r.value;
  }
  // The subject NATS gets, routed or not, and its reply pass the door's checks (a route
  // builds from client-chosen values; a line too long would close a shared connection).
  const problem = publishSubjectProblem(subject, reply, ctx.maxSubjectBytes ?? 0, routed);
  if (problem)
    return err({
      reasonCode: problem.kind === "reserved" ? Reason.notAuthorized : Reason.topicNameInvalid,
      reason: problem.reason,
    });

  if (p.qos === 0 && !p.retain && props === undefined) {
    // The common case, a QoS 0 publish with nothing to say, is a plain PUB (docs/performance.md).
    if (ctx.markClientId === false) return ok({ subject, headers: undefined, reply });
    if (ctx.bareHeaders !== undefined) return ok({ subject, headers: ctx.bareHeaders, reply });
  }
  // Assignments, not conditional spreads: this runs per message, and spreads are several times slower.
  const meta: MessageMeta = {};
  if (p.qos > 0) meta.qos = p.qos;
  if (p.retain) meta.mqttRetain = true;
  meta.mqttClientId = ctx.clientId;
  if (props !== undefined) {
    if (props.contentType !== undefined) meta.contentType = props.contentType;
    if (props.correlationData !== undefined) meta.correlationId = props.correlationData;
    if (props.messageExpiryInterval !== undefined) meta.expiresAt = ctx.now + props.messageExpiryInterval * 1000;
    if (props.payloadFormatIndicator !== undefined) meta.mqttPayloadFormat = props.payloadFormatIndicator ? 1 : 0;
  }
  if (reply !== undefined) meta.replyTo = reply;
  if (userProps?.length) meta.userProps = userProps;
  return ok({ subject, headers: metaToHeaders(meta, true), reply });
}

/** The headers of a bare publish from `clientId` (no QoS, RETAIN or properties to say): only Mqgw-Mqtt-Client-Id. */
export function bareHeaders(clientId: string): Array<[string, string]> {
  return metaToHeaders({ mqttClientId: clientId }, true)!;
}

/**
 * User Properties as pairs in wire order, as the gateway's parsers give them. An object
 * (mqtt-packet's form, grouped by key) is still taken: it keeps each key's values in order.
 */
export function userPropertyPairs(
  up: Array<[string, string]> | Record<string, string | string[]>,
): Array<[string, string]> {
  if (Array.isArray(up)) return up;
  const out: Array<[string, string]> = [];
  for (const [k, v] of Object.entries(up)) {
    if (Array.isArray(v)) for (const x of v) out.push([k, String(x)]);
    else out.push([k, String(v)]);
  }
  return out;
}

const decoder = new TextDecoder("utf-8", { fatal: true });
export function isUtf8(bytes: Uint8Array): boolean {
  try {
    decoder.decode(bytes);
    return true;
  } catch {
    return false;
  }
}
