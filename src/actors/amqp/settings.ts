import type { GatewayConfig, SaslMechanism } from "../../config/schema.js";
import type { Route } from "../../protocol/mqttToNats.js";
import { lineLimits } from "../../protocol/natsLimits.js";
import { parseTemplate } from "../../protocol/route.js";
import type { Tracing } from "../tracing/tracing.js";

/**
 * The AMQP door's settings, read per new connection so a reload applies to new work.
 * Numbers the CONTRACT leaves open are fixed here (docs/decisions/amqp-connections.md).
 */
export interface AmqpSettings {
  readonly maxFrameSize: number;
  /** The highest channel (session) number a client may use. */
  readonly channelMax: number;
  /** Advertised in open; a connection silent for this long is closed. */
  readonly idleTimeoutMs: number;
  /** From accept to the AMQP open. */
  readonly handshakeTimeoutMs: number;
  readonly sasl: readonly SaslMechanism[];
  readonly routes: ReadonlyMap<string, Route>;
  readonly routeList: readonly Route[];
  /** Links of each direction one connection may hold; receiving links also obey limits.max_subscriptions_per_client. */
  readonly maxSenderLinks: number;
  readonly maxReceiverLinks: number;
  /** Credit the gateway keeps open on each link a client sends on. */
  readonly senderCredit: number;
  /** Messages a receiving link holds for a client that has no credit; older ones are dropped (core) or left unpulled (JetStream). */
  readonly maxQueuedPerLink: number;
  readonly storedPublishTimeoutMs: number;
  /** amqp.dedupe_message_id: unsettled messages are stored once per container and message-id (docs/decisions/publish-identity.md). */
  readonly dedupeMessageId: boolean;
  /** How long a JetStream pull waits for messages before it is renewed. */
  readonly pullExpiresMs: number;
  /** Address (plus reply-to) bytes that fit a NATS protocol line (protocol/natsLimits.ts). */
  readonly maxSubjectBytes: number;
  /** `tracing` (started once, at start): undefined when off (docs/decisions/trace-context.md). */
  readonly tracing?: Tracing | undefined;
}

export function amqpSettingsOf(config: GatewayConfig, tracing?: Tracing): AmqpSettings {
  const routeList: Route[] = config.amqp.routes.flatMap((r) => {
    const t = parseTemplate(r.template);
    return t.ok ? [{ subject: r.subject, template: t.value }] : [];
  });
  const subscriptions = config.limits.max_subscriptions_per_client;
  return {
    maxFrameSize: config.amqp.max_frame_size,
    channelMax: 255,
    idleTimeoutMs: config.amqp.idle_timeout,
    handshakeTimeoutMs: config.limits.connect_timeout,
    sasl: config.amqp.sasl,
    routes: new Map(routeList.map((r) => [r.subject, r])),
    routeList,
    maxSenderLinks: 256,
    maxReceiverLinks: subscriptions > 0 ? Math.min(subscriptions, 256) : 256,
    senderCredit: 64,
    maxQueuedPerLink: 1_000,
    storedPublishTimeoutMs: 5_000,
    dedupeMessageId: config.amqp.dedupe_message_id,
    pullExpiresMs: 30_000,
    maxSubjectBytes: lineLimits(config.nats.max_control_line, config.id, config.mqtt.sessions_bucket).subjectBytes,
    tracing,
  };
}

/** Settings for the config in force: rebuilt after a reload (SIGHUP), shared until then. */
export function amqpSettingsFor(current: () => GatewayConfig, tracing?: Tracing): () => AmqpSettings {
  let seen: GatewayConfig | undefined;
  let settings: AmqpSettings | undefined;
  return () => {
    const config = current();
    if (config !== seen || !settings) {
      seen = config;
      settings = amqpSettingsOf(config, tracing);
    }
    return settings;
  };
}
