import type { Msg } from "@nats-io/transport-node";
import type { Logger } from "../../log.js";
import type { AccountServices } from "../accountServices.js";
import type { MessageStore } from "../messageStore.js";
import type { ActorRegistry } from "../registry.js";
import type { PullBudget } from "./pullWindow.js";
import type { StoredDelivery } from "./storedDelivery.js";

/** What a stored subscription's delivery (storedDelivery.ts) reads, where its messages go, and its times. */
export interface OpenOptions {
  readonly services: AccountServices;
  readonly account: string;
  readonly stream: string;
  /** The consumer to create (a fresh subscription), or to take over from (a resume). */
  readonly name: string;
  readonly subjects: readonly string[];
  readonly maxAckPending: number;
  /** The session's expiry: the server removes the consumer when nobody read it that long. */
  readonly inactiveMs: number;
  /**
   * The session is resumed: read on from what was acknowledged in order (`floor`, as the
   * record has it; 0 when unknown), skipping what was acknowledged above it.
   */
  readonly resume?: { readonly floor: number; readonly above: readonly number[] } | undefined;
  /** Reading the MQTT store: made on first use, by a subscriber as well as a publisher. */
  readonly store?: MessageStore | undefined;
  readonly registry?: ActorRegistry | undefined;
}

/**
 * Who the messages go to: the connection reading the subscription (another one's after a
 * resume adopts it). Everything of a connection the delivery refers to is here, and given
 * up when another connection adopts it: the options (OpenOptions) hold nothing of one, so a
 * reader adopted resume after resume keeps no earlier connection's objects alive. Methods,
 * not function fields: a literal of closures and a getter was a dictionary-mode object of
 * ~0.5 KB each (docs/performance.md, "What a resumed session holds").
 */
export interface Recipient {
  /** A new name for each consumer a resume or a reopen creates (the session's epoch names it). */
  renamed(): string;
  /** A message to deliver, with its stream sequence. */
  onMessage(m: Msg, seq: number, delivery: StoredDelivery): void;
  /** The consumer the subscription reads changed (the session's record names it). */
  onConsumer?(name: string): void;
  readonly log?: Logger | undefined;
  /** The client's bytes: the pull pauses while they are at their bound (pullWindow.ts). */
  readonly budget?: PullBudget | undefined;
}

/** What the first attempt came to: reading, waiting for the store, or refused for good. */
export type StoredOutcome =
  | { readonly state: "reading" }
  | { readonly state: "waiting"; readonly reason: string; readonly limit: boolean }
  | { readonly state: "refused"; readonly reason: string; readonly permission: boolean };

/**
 * Pull requests of 10 s: an idle consumer asks again this often. 3 s made 10,000 idle sessions
 * (20,000 readers) cost the gateway and its nats-server 0.55 of a core in pulls; 10 s, 0.26.
 * A pull a restarted nats-server forgot costs no wait: the readers hold while NATS is away and
 * ask again as soon as it is back (client/connectionPulls.ts); one whose consumer's leader
 * died while the gateway's connection stayed on another node is answered "409 Leadership
 * Change" once a new leader is elected, and asked again then (test/actors/pullLeader.test.ts). With
 * PARK_MS after the last pull it stays under the pin's 30 s priority_timeout, and the pin
 * watch's looks (1, 2, 4, 8 s) outlast an older reader's pull (pinnedTakeover.ts).
 */
export const PULL_EXPIRES_MS = 10_000;
/**
 * How long a parked subscription waits for a resume here: its consumer's pin lasts 30 s
 * after the last pull (pinnedTakeover.ts), which was at most PULL_EXPIRES_MS before parking.
 */
export const PARK_MS = 15_000;

/** A failure waiting cannot cure: the subscription is refused, or goes on live only. */
export class StoreRefused extends Error {}

/** Waits after a failed attempt: 250 ms, doubling, at most 5 s, each jittered (machines/storedDelivery.ts). */
export const RETRY_BACKOFF_MS = 250;
export const RETRY_BACKOFF_MAX_MS = 5_000;
