import type { SessionHomes } from "../../gateway/sessionHomes.js";
import type { Logger } from "../../log.js";
import type { AccountServices } from "../accountServices.js";
import type { BanCheck } from "../admin/banList.js";
import type { Bindings } from "../bindings.js";
import type { NatsBridge, NatsLease } from "../client/natsBridge.js";
import type { ClientRegistry } from "../clients.js";
import type { MessageStore } from "../messageStore.js";
import type { Metrics } from "../metrics.js";
import type { Quotas } from "../quotas.js";
import type { ActorRegistry } from "../registry.js";
import type { ConnectBuffers } from "./connectBuffers.js";
import type { ParkedDeliveries } from "./parkedDeliveries.js";
import type { RetainedMessages } from "./retained.js";
import type { SessionDirectory } from "./sessionDirectory.js";
import type { SessionStore } from "./sessionStore.js";
import type { MqttSettings } from "./settings.js";

/** What the MQTT sessions of a gateway share: its stores, bindings and services. */
export interface SessionDeps {
  readonly services: AccountServices;
  readonly bindings: Bindings;
  /** The MQTT store: QoS 1/2 messages on unbound subjects, for persistent sessions. */
  readonly messages: MessageStore;
  readonly retained: RetainedMessages;
  readonly store: SessionStore;
  readonly gatewayId: string;
  /** Where the stored deliveries' machines are counted (mqgw_actors); none in unit tests. */
  readonly registry?: ActorRegistry | undefined;
  /** Stored subscriptions of detached sessions, kept for a resume here (parkedDeliveries.ts); none: nothing is parked. */
  readonly parked?: ParkedDeliveries | undefined;
}

/** What every MQTT connection actor is given by the gateway. */
export interface MqttDeps {
  readonly bridge: NatsBridge;
  readonly clients: ClientRegistry;
  readonly registry: ActorRegistry;
  readonly session: SessionDeps;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly settings: () => MqttSettings;
  readonly accountOf: (lease: NatsLease, username: string | undefined) => Promise<string>;
  /** What `accountOf` would answer when known without waiting (natsForConnect.ts `natsForConnectNow`). */
  readonly accountNow?: (lease: NatsLease, username: string | undefined) => string | undefined;
  /** limits.max_connections_per_account, read per connection so a reload applies; 0 = no limit. */
  readonly maxConnectionsPerAccount: () => number;
  /** The sessions open on this gateway: a client id's sessions run one after another. */
  readonly directory: SessionDirectory;
  /** Tells the other gateways of the account that this client id connected here (they close theirs). */
  readonly announce: (account: string, clientId: string, cleanStart: boolean) => void;
  /** Asks the gateway that holds a client's session to let it go (false: it did not answer). */
  readonly remoteTakeover: (account: string, clientId: string, owner: string, cleanStart: boolean) => Promise<boolean>;
  /** Bans in force on every gateway: a banned client is refused at CONNECT (natsForConnect.ts). */
  readonly bans?: BanCheck;
  /** limits.per_client and limits.per_account (quotas.ts). */
  readonly quotas: Quotas;
  /** limits.max_connect_buffer: partial CONNECTs of all sockets together. */
  readonly connectBuffers: ConnectBuffers;
  /** A worker of `run --workers`: where each persistent session is served (gateway/sessionHomes.ts). */
  readonly homes?: SessionHomes | undefined;
}
