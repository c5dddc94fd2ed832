import type { Route } from "../../protocol/mqttToNats.js";
import type { Tracing } from "../tracing/tracing.js";

/** The MQTT door's settings, read per new connection so a reload applies to new work. */
export interface MqttSettings {
  /** mqtt.max_packet_size capped by what NATS takes (natsLimits.ts): the CONNACK's and the inbound limit. */
  readonly maxPacketSize: number;
  /** The NATS max_payload the cap was made from. */
  readonly natsMaxPayload: number | undefined;
  readonly receiveMaximum: number;
  readonly maxKeepaliveSec: number;
  readonly sessionExpiryMaxSec: number;
  readonly connectTimeoutMs: number;
  readonly maxSubscriptionsPerClient: number;
  /** Levels of a topic or filter (limits.max_topic_levels); 0 = no limit. */
  readonly maxTopicLevels: number;
  /** mqtt.client_id_header: "when_needed" lets bare QoS 0 go as plain PUB. */
  readonly clientIdHeaderAlways: boolean;
  readonly topicAliasMaximum: number;
  /** What clients may use (mqtt.maximum_qos, retain_available, ...): the CONNACK says it, PUBLISH and SUBSCRIBE are held to it. */
  readonly maximumQos: 0 | 1 | 2;
  readonly retainAvailable: boolean;
  readonly wildcardSubscriptionAvailable: boolean;
  readonly sharedSubscriptionAvailable: boolean;
  readonly routes: ReadonlyMap<string, Route>;
  readonly routeList: readonly Route[];
  /** limits.max_client_buffer: bytes held for one client on their way out (clientBytes.ts). */
  readonly maxClientBuffer: number;
  /** limits.write_deadline: how long a client may stay at that bound while its socket takes nothing. */
  readonly writeDeadlineMs: number;
  /** Subject plus reply (or queue group) bytes that fit a NATS protocol line (protocol/natsLimits.ts). */
  readonly maxSubjectBytes: number;
  /** Client id bytes whose sessions-bucket key fits a NATS protocol line. */
  readonly maxClientIdBytes: number;
  /** `tracing` (started once, at start): undefined when off (docs/decisions/trace-context.md). */
  readonly tracing?: Tracing | undefined;
}
