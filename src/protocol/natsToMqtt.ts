import { answerableReply, headersToMeta, type MessageMeta } from "./headers.js";
import type { PublishProperties } from "./mqttProperties.js";
import { deliverableTo, subjectToTopic, utf8Length } from "./topic.js";

/** What a subscription asked for, as far as delivery is concerned. */
export interface SubscriptionOptions {
  readonly qos: 0 | 1 | 2;
  readonly noLocal: boolean;
  readonly retainAsPublished: boolean;
  readonly subscriptionId?: number | undefined;
  /** One copy standing for several overlapping subscriptions: all their identifiers [MQTT-3.3.4-4]. */
  readonly subscriptionIds?: readonly number[] | undefined;
  /** The filter starts with + or #, so $ topics do not match it. */
  readonly dollarGuard: boolean;
}

export interface Receiver {
  readonly protocolVersion: 4 | 5;
  readonly clientId: string;
  readonly now: number;
}

export interface OutboundPublish {
  topic: string;
  payload: Uint8Array;
  qos: 0 | 1 | 2;
  retain: boolean;
  properties?: PublishProperties;
  /** Properties MQTT cannot carry, left out ("What a crossing loses"): counted in /metrics. */
  lost?: number;
}

export type Skip = "no_topic" | "dollar" | "no_local" | "expired";

/**
 * A NATS message on a subscription -> the PUBLISH the client gets, or why it gets none.
 * `headers` is undefined for a plain PUB, the common case, which then costs no decoding.
 */
export function natsToMqttPublish(
  subject: string,
  headers: Iterable<[string, string]> | undefined,
  payload: Uint8Array,
  reply: string | undefined,
  sub: SubscriptionOptions,
  rx: Receiver,
  retainedDelivery = false,
  /** How headers become metadata: a `LastMeta`'s `read` for a receiver whose header pairs repeat. */
  metaOf: (headers: Iterable<[string, string]>, strict: boolean) => MessageMeta = headersToMeta,
): OutboundPublish | Skip {
  const topic = subjectToTopic(subject);
  if (topic === undefined) return "no_topic";
  if (!deliverableTo(topic, sub.dollarGuard)) return "dollar";
  // MQTT 5 strings must be UTF-8: read strictly what becomes one (v5 properties).
  const meta: MessageMeta = headers ? metaOf(headers, rx.protocolVersion === 5) : {};
  if (sub.noLocal && meta.mqttClientId === rx.clientId) return "no_local";
  let expiry: number | undefined;
  if (meta.expiresAt !== undefined) {
    const left = Math.ceil((meta.expiresAt - rx.now) / 1000);
    if (left <= 0) return "expired";
    expiry = left;
  }
  const qos = Math.min(meta.qos ?? 0, sub.qos) as 0 | 1 | 2;
  // [MQTT-3.3.1-9] live messages go out with RETAIN 0 unless Retain As Published.
  const retain = retainedDelivery || (sub.retainAsPublished && meta.mqttRetain === true);
  const out: OutboundPublish = { topic, payload, qos, retain };
  if (rx.protocolVersion === 5) {
    // A value MQTT cannot carry (over 65,535 bytes, U+0000, not UTF-8) does not reach the
    // client (mapping-to-nats.md, "What a crossing loses"): left out, never truncated.
    let lost = meta.lost ?? 0;
    const props: PublishProperties = {};
    const replyTo = meta.replyTo ?? answerableReply(meta, reply);
    if (replyTo !== undefined) {
      const rt = subjectToTopic(replyTo);
      if (rt !== undefined) props.responseTopic = rt;
      else if (meta.replyTo !== undefined) lost++;
    }
    if (meta.contentType !== undefined) {
      if (mqttString(meta.contentType)) props.contentType = meta.contentType;
      else lost++;
    }
    if (meta.correlationId !== undefined) {
      if (meta.correlationId.byteLength <= MAX_MQTT_STRING) props.correlationData = Buffer.from(meta.correlationId);
      else lost++;
    }
    if (expiry !== undefined) props.messageExpiryInterval = expiry;
    if (meta.mqttPayloadFormat !== undefined) props.payloadFormatIndicator = meta.mqttPayloadFormat === 1;
    if (meta.userProps?.length) {
      // In the order Mqgw-Mqtt-Props-Order gives, written as a list (mqttProperties.ts).
      const carried = meta.userProps.filter(([k, v]) => mqttString(k) && mqttString(v));
      lost += meta.userProps.length - carried.length;
      if (carried.length > 0) props.userProperties = carried;
    }
    if (sub.subscriptionIds?.length) props.subscriptionIdentifier = [...sub.subscriptionIds];
    else if (sub.subscriptionId !== undefined) props.subscriptionIdentifier = sub.subscriptionId;
    if (Object.keys(props).length > 0) out.properties = props;
    if (lost > 0) out.lost = lost;
  }
  return out;
}

/** MQTT's two-byte length prefix (MQTT 5, 1.5.4). */
const MAX_MQTT_STRING = 65_535;

/** An MQTT UTF-8 Encoded String: at most 65,535 bytes and no U+0000 [MQTT-1.5.4-1, -2] (JS strings from a decoder are UTF-8 already). */
export function mqttString(s: string): boolean {
  if (s.length * 3 > MAX_MQTT_STRING && (s.length > MAX_MQTT_STRING || utf8Length(s) > MAX_MQTT_STRING)) return false;
  return s.indexOf("\u0000") < 0;
}
