import { Data } from "effect";
import type { ISubscription } from "mqtt-packet";
import type { InboundRecord } from "./inboundState.js";
import type { ActiveSubscription } from "./subscriptions.js";

/**
 * The consumer metadata naming the sessions bucket whose records name the consumer: gateways
 * with another bucket on the same stream (another deployment, a test) keep their own, and
 * consumers made before the key existed are never taken for orphans.
 */
export const SESSIONS_BUCKET_KEY = "mqgw_sessions_bucket";

/** One subscription of a stored session, with where its stored deliveries come from. */
export interface StoredSubscription {
  readonly subscription: ISubscription;
  readonly subscriptionId: number | undefined;
  /** The stream its QoS 1/2 messages are read from (a bound stream, or the MQTT store). */
  readonly stream?: string | undefined;
  /** The durable consumer on that stream, taken over by each connection that resumes the session (storedDelivery.ts). */
  readonly consumer?: string | undefined;
}

/** A subscription as its session's record keeps it. */
export function storedSubscription(
  sub: ActiveSubscription,
  stream: string | undefined,
  consumer: string | undefined,
): StoredSubscription {
  const { options } = sub;
  return {
    subscription: {
      topic: sub.filter,
      qos: options.qos,
      nl: options.noLocal,
      rap: options.retainAsPublished,
      rh: sub.retainHandling,
    },
    subscriptionId: options.subscriptionId,
    stream,
    consumer,
  };
}

/**
 * What the client had in flight from the gateway when its connection ended [MQTT-4.4.0-1]:
 * stored deliveries sent and not yet acknowledged (they come again with their packet ids and
 * DUP set), QoS 2 deliveries the client has (PUBREC) waiting for PUBREL, and per stored
 * subscription (by filter) how far it had acknowledged everything (`floor`) and what it
 * acknowledged above that (skipped when the next connection reads from the floor on).
 */
export interface OutboundRecord {
  readonly unacked?: ReadonlyArray<{ readonly filter: string; readonly seq: number; readonly pid: number }>;
  readonly pubrel?: readonly number[];
  readonly acked?: ReadonlyArray<{
    readonly filter: string;
    readonly floor: number;
    readonly above: readonly number[];
  }>;
}

/** What survives a disconnect of a client with a session expiry. */
export interface StoredSession {
  /**
   * Drawn when the session starts fresh: its consumers are named for it, so the cleanup of
   * an older session of the same client id can never touch a newer one's.
   */
  readonly epoch?: string | undefined;
  readonly subscriptions: readonly StoredSubscription[];
  /** Unix ms; while connected, now + the session expiry, refreshed on each save. */
  readonly expiresAt: number;
  /** The session expiry in seconds, as it stood at the last save. */
  readonly expirySec?: number | undefined;
  /** The gateway holding the client's connection, and whether it is connected now. */
  readonly owner?: string | undefined;
  readonly connected?: boolean | undefined;
  /** The client's QoS 1/2 publishes not yet acknowledged, and QoS 2 ones waiting for PUBREL (inboundState.ts). */
  readonly inbound?: InboundRecord | undefined;
  readonly outbound?: OutboundRecord | undefined;
}

/** A session as read, with the store's revision of it (conditional writes compare against it). */
export interface LoadedSession {
  readonly session: StoredSession;
  readonly revision: number;
  /** Its expiry passed while nobody held it: to be discarded (its consumers with it). */
  readonly expired: boolean;
}

/** A conditional write found a newer record: another connection owns the session now. */
export class SessionMovedOn extends Error {
  constructor(clientId: string) {
    super(`session of ${clientId} was written by a newer connection`);
  }
}

export interface SaveOptions {
  /** Write only if the record is still at this revision (else SessionMovedOn). */
  readonly revision?: number | undefined;
  /** The store drops the record this long after the write (a detached session's expiry). */
  readonly ttlSec?: number | undefined;
}

/** Where MQTT sessions live: the KV bucket of the client's account. */
/**
 * The store could not be read. `answersLater`: it may answer if asked again (a timeout, a
 * bucket electing its leader, a JetStream still loading), as opposed to one that will not
 * (no JetStream on the server, the gateway user may not read it).
 */
export class SessionStoreUnread extends Data.TaggedError("SessionStoreUnread")<{
  readonly message: string;
  readonly answersLater: boolean;
}> {}

export interface SessionStore {
  /** Rejects with SessionStoreUnread when the store does not give the record. */
  load(account: string, clientId: string): Promise<LoadedSession | undefined>;
  /** Resolves with the record's new revision. */
  save(account: string, clientId: string, session: StoredSession, options?: SaveOptions): Promise<number>;
  /** `revision`: remove only if nobody wrote since (else SessionMovedOn). */
  remove(account: string, clientId: string, revision?: number): Promise<void>;
  /**
   * False when the store knows, without reading, that it holds no session of this client
   * (a clean start then skips the read); true or absent: read it.
   */
  mayHold?(account: string, clientId: string): boolean;
}
