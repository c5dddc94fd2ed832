import { answerableReply, headersToMeta, type MessageMeta } from "./headers.js";
import { deliverableTo, subjectToTopic } from "./topic.js";

/** What a subscription asked for, as far as delivery is concerned. */
export interface SubscriptionOptions {
  readonly qos: 0 | 1 | 2;
  readonly noLocal: boolean;
  readonly retainAsPublished: boolean;
  readonly subscriptionId?: number | undefined;
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
  properties?: Record<string, unknown>;
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
): OutboundPublish | Skip {
  const topic = subjectToTopic(subject);
  if (topic === undefined) return "no_topic";
  if (!deliverableTo(topic, sub.dollarGuard)) return "dollar";
  const meta: MessageMeta = headers ? headersToMeta(headers) : {};
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
    const props: Record<string, unknown> = {};
    const replyTo = meta.replyTo ?? answerableReply(meta, reply);
    if (replyTo !== undefined) {
      const rt = subjectToTopic(replyTo);
      if (rt !== undefined) props.responseTopic = rt;
    }
    if (meta.contentType !== undefined) props.contentType = meta.contentType;
    if (meta.correlationId !== undefined) props.correlationData = Buffer.from(meta.correlationId);
    if (expiry !== undefined) props.messageExpiryInterval = expiry;
    if (meta.mqttPayloadFormat !== undefined) props.payloadFormatIndicator = meta.mqttPayloadFormat === 1;
    if (meta.userProps?.length) props.userProperties = groupUserProperties(meta.userProps);
    if (sub.subscriptionId !== undefined) props.subscriptionIdentifier = sub.subscriptionId;
    if (Object.keys(props).length > 0) out.properties = props;
  }
  return out;
}

/** mqtt-packet writes user properties from an object: one key, its values in order. */
function groupUserProperties(pairs: Array<[string, string]>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of pairs) {
    const prev = out[k];
    if (prev === undefined) out[k] = v;
    else if (Array.isArray(prev)) prev.push(v);
    else out[k] = [prev, v];
  }
  return out;
}
