import type { MqttSettings } from "../actors/mqtt/settings.js";
import type { Tracing } from "../actors/tracing/tracing.js";
import type { GatewayConfig } from "../config/schema.js";
import type { Route } from "../protocol/mqttToNats.js";
import { clientMessageLimit, lineLimits } from "../protocol/natsLimits.js";
import { parseTemplate } from "../protocol/route.js";

/**
 * GatewayConfig -> what an MQTT connection reads; rebuilt on reload, and when NATS's
 * max_payload changes. `natsMaxPayload`: the server's INFO max_payload.
 */
export function mqttSettingsOf(
  config: GatewayConfig,
  natsMaxPayload: number | undefined,
  tracing?: Tracing,
): MqttSettings {
  const routeList: Route[] = config.mqtt.routes.flatMap((r) => {
    const t = parseTemplate(r.template);
    return t.ok ? [{ subject: r.subject, template: t.value }] : [];
  });
  const lines = lineLimits(config.nats.max_control_line, config.id, config.mqtt.sessions_bucket);
  return {
    // CONTRACT: [1MiB, capped by NATS max_payload], after room for the gateway's headers.
    maxPacketSize: Math.min(config.mqtt.max_packet_size, clientMessageLimit(natsMaxPayload)),
    natsMaxPayload,
    receiveMaximum: config.mqtt.receive_maximum,
    maxKeepaliveSec: Math.floor(config.mqtt.max_keepalive / 1000),
    sessionExpiryMaxSec: Math.floor(config.mqtt.session_expiry_max / 1000),
    connectTimeoutMs: config.limits.connect_timeout,
    maxSubscriptionsPerClient: config.limits.max_subscriptions_per_client || Number.POSITIVE_INFINITY,
    maxTopicLevels: config.limits.max_topic_levels,
    clientIdHeaderAlways: config.mqtt.client_id_header === "always",
    topicAliasMaximum: 64,
    maximumQos: config.mqtt.maximum_qos,
    retainAvailable: config.mqtt.retain_available,
    wildcardSubscriptionAvailable: config.mqtt.wildcard_subscription_available,
    sharedSubscriptionAvailable: config.mqtt.shared_subscription_available,
    routes: new Map(routeList.map((r) => [r.subject, r])),
    routeList,
    maxClientBuffer: config.limits.max_client_buffer,
    writeDeadlineMs: config.limits.write_deadline,
    maxSubjectBytes: lines.subjectBytes,
    maxClientIdBytes: lines.clientIdBytes,
    tracing,
  };
}
