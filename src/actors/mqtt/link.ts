import type { Packet } from "mqtt-packet";
import type { Logger } from "../../log.js";
import { Reason } from "../../protocol/mqttReasons.js";
import { ActorTasks } from "../actorTasks.js";
import type { NatsLease } from "../client/natsBridge.js";
import { RefusalTally } from "../client/refusalTally.js";
import type { Metrics } from "../metrics.js";
import type { ClientQuota } from "../quotas.js";
import type { ClientBytes } from "./clientBytes.js";
import type { MqttSettings } from "./settings.js";

/**
 * What the parts of one MQTT connection (inbound publishes, the session's subscriptions)
 * share: who the client is, how to answer it, and how to end it.
 */
export interface ClientLink {
  readonly version: 4 | 5;
  readonly clientId: string;
  readonly account: string;
  readonly lease: NatsLease;
  readonly settings: MqttSettings;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** limits.per_client and limits.per_account, asked for each publish (quotas.ts). */
  readonly quota: ClientQuota;
  /** false only when the packet is larger than the client allows (dropped and counted). */
  write(packet: Packet): boolean;
  /** What the gateway holds for the client on its way out, within limits.max_client_buffer. */
  readonly bytes: ClientBytes;
  protocolError(reasonCode: number, reason: string): void;
  /** Subjects NATS refused this connection, reported by the bridge before the flush's PONG. */
  readonly denied: DeniedSubjects;
  /**
   * No Local subscriptions the client holds now (kept by its session). Only the client itself
   * can be a No Local receiver of its own messages, so while this is 0 a QoS 0 publish with
   * nothing else to say goes out as plain PUB, without Mqgw-Mqtt-Client-Id (docs/performance.md).
   */
  readonly noLocal: { count: number };
  /** The connection's async work, not waited for where it starts (actorTasks.ts): ended with the connection. */
  readonly tasks: ActorTasks;
}

/** Subjects NATS refused, by operation; each is made on first use (most clients are never refused). */
export class DeniedSubjects {
  private p: RefusalTally | undefined;
  private s: Set<string> | undefined;
  get publish(): RefusalTally {
    return (this.p ??= new RefusalTally());
  }
  get subscribe(): Set<string> {
    return (this.s ??= new Set());
  }
}

/** What a link asks of the connection it belongs to. */
export interface LinkOwner {
  readonly log: Logger;
  write(packet: Packet): boolean;
  readonly bytes: ClientBytes;
  protocolError(reasonCode: number, reason: string): void;
}

/**
 * The link of one MQTT connection. A class: an object literal with a getter (the lazy
 * logger) is kept as a dictionary by V8, 0.8 KiB per connection (docs/performance.md).
 */
export class ConnectionLink implements ClientLink {
  readonly noLocal = { count: 0 };
  /** Made when work is first started: an idle connection has none in flight. */
  private work: ActorTasks | undefined;

  constructor(
    readonly version: 4 | 5,
    readonly clientId: string,
    readonly account: string,
    readonly lease: NatsLease,
    readonly settings: MqttSettings,
    readonly metrics: Metrics,
    readonly denied: DeniedSubjects,
    readonly quota: ClientQuota,
    private readonly owner: LinkOwner,
  ) {}

  get log(): Logger {
    return this.owner.log;
  }
  write(packet: Packet): boolean {
    return this.owner.write(packet);
  }
  get bytes(): ClientBytes {
    return this.owner.bytes;
  }
  protocolError(reasonCode: number, reason: string): void {
    this.owner.protocolError(reasonCode, reason);
  }
  get tasks(): ActorTasks {
    // A failure its work did not answer itself is the gateway's: said, and the client closed (as AMQP's is).
    this.work ??= new ActorTasks((e) => {
      this.log.error({ err: e instanceof Error ? e.stack : String(e) }, "MQTT connection failed");
      this.protocolError(Reason.implementationSpecific, "the gateway failed on this connection");
    });
    return this.work;
  }
  /** The connection ended: what its work still runs is interrupted, and nothing more starts. */
  endTasks(): void {
    this.work ??= new ActorTasks(() => {});
    this.work.close();
  }
}
