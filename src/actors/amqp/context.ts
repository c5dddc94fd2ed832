import type { JetStreamManager } from "@nats-io/jetstream";
import type { Logger } from "../../log.js";
import { clientMessageLimit } from "../../protocol/natsLimits.js";
import type { Bindings } from "../bindings.js";
import type { NatsLease } from "../client/natsBridge.js";
import type { MessageStore } from "../messageStore.js";
import type { Metrics } from "../metrics.js";
import type { ClientQuota } from "../quotas.js";
import type { ActorRegistry } from "../registry.js";
import type { Outflow } from "./outflow.js";
import { Publisher } from "./publisher.js";
import type { AmqpSettings } from "./settings.js";

/** What every link of one connection shares: the client's NATS connection and identity. */
export interface LinkContext {
  readonly lease: NatsLease;
  readonly account: string;
  readonly containerId: string;
  readonly settings: AmqpSettings;
  /** The largest message a client may send: what NATS takes in one message (max_payload) less room for headers. */
  readonly maxMessageSize: number;
  /** limits.max_topic_levels: tokens an address may have (0: no limit). */
  readonly maxTopicLevels: number;
  /** limits.per_client and limits.per_account, asked for each message the client sends (quotas.ts). */
  readonly quota: ClientQuota;
  readonly bindings: Bindings;
  readonly publisher: Publisher;
  /** The bytes on their way to the client, shared by the connection's receiving links. */
  readonly outflow: Outflow;
  /** The JetStream API on the client's own connection (its permissions apply), made on first use. */
  readonly jsm: () => Promise<JetStreamManager>;
  readonly metrics: Metrics;
  readonly registry: ActorRegistry;
  readonly log: Logger;
  /** Ends the whole connection: for a client that goes on breaking a link's rules after its detach. */
  readonly closeConnection: (condition: string, description: string) => void;
}

/** The context of a connection whose client is served: its lease, identity and shared helpers. */
export function linkContext(o: {
  readonly lease: NatsLease;
  readonly account: string;
  readonly containerId: string;
  readonly settings: AmqpSettings;
  readonly maxTopicLevels: number;
  readonly quota: ClientQuota;
  readonly bindings: Bindings;
  readonly messages: MessageStore;
  readonly metrics: Metrics;
  readonly registry: ActorRegistry;
  readonly log: Logger;
  readonly outflow: Outflow;
  readonly closeConnection: (condition: string, description: string) => void;
}): LinkContext {
  let jsm: Promise<JetStreamManager> | undefined;
  return {
    ...o,
    maxMessageSize: clientMessageLimit(o.lease.nats.info()?.max_payload),
    publisher: new Publisher(o.lease, o.account, o.messages, o.metrics, o.settings.storedPublishTimeoutMs),
    jsm: () => {
      // Made once; a failure (JetStream off, no permission) is retried by the next link.
      jsm ??= o.lease.nats
        .jetStream(5_000)
        .then(({ jsm }) => jsm)
        .catch((e: unknown) => {
          jsm = undefined;
          throw e;
        });
      return jsm;
    },
  };
}
