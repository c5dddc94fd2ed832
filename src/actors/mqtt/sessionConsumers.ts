import { hash, randomFillSync } from "node:crypto";
import { AckPolicy, type ConsumerConfig } from "@nats-io/jetstream";
import { PINNED } from "./pinnedTakeover.js";
import { SESSIONS_BUCKET_KEY, type StoredSubscription } from "./sessionStore.js";

/**
 * The consumers of one filter of one session are named from (account, client id, filter,
 * epoch) and a suffix per connection that made one; the epoch makes every fresh
 * session's names its own (a session saved before epochs existed has none).
 */
export function sessionConsumerName(
  account: string,
  clientId: string,
  filter: string,
  epoch: string | undefined,
): string {
  const key =
    epoch === undefined
      ? `${account}\u0000${clientId}\u0000${filter}`
      : `${account}\u0000${clientId}\u0000${filter}\u0000${epoch}`;
  const base = `mqgw-${hash("sha256", key, "hex").slice(0, 24)}`;
  return epoch === undefined ? base : `${base}-${randomSuffix()}`;
}

/**
 * 8 random hex digits, from a pool filled 512 at a time: a connect storm names two
 * consumers per session, and `randomBytes` per name (a native call and a Buffer each) was
 * about 1 % of the gateway's CPU while 3,000 sessions connected and subscribed.
 */
const randomPool = Buffer.alloc(2048);
let randomAt = randomPool.length;
function randomSuffix(): string {
  if (randomAt + 4 > randomPool.length) {
    randomFillSync(randomPool);
    randomAt = 0;
  }
  randomAt += 4;
  return randomPool.toString("hex", randomAt - 4, randomAt);
}

/** A stored subscription's consumer: named in its record, or, in a record from before epochs, by filter alone. */
export function recordedConsumer(
  s: StoredSubscription,
  account: string,
  clientId: string,
  epoch: string | undefined,
): string {
  return s.consumer ?? sessionConsumerName(account, clientId, s.subscription.topic, epoch);
}

/** What a session's consumer is made with, but where it starts (storedDelivery.ts). */
export function sessionConsumerConfig(o: {
  readonly subjects: readonly string[];
  readonly maxAckPending: number;
  /** The session's expiry: the server removes the consumer when nobody read it that long. */
  readonly inactiveMs: number;
  /** The sessions bucket whose records name it. */
  readonly bucket: string;
  /** A pinned_client consumer, taken over in place by a resume (nats-server 2.14+). */
  readonly pinned: boolean;
}): Partial<ConsumerConfig> {
  return {
    ack_policy: AckPolicy.Explicit,
    filter_subjects: [...o.subjects],
    max_ack_pending: o.maxAckPending,
    ack_wait: 30_000_000_000,
    inactive_threshold: Math.max(60_000, o.inactiveMs) * 1_000_000,
    // Whose records name it: only that bucket's sweep may take it for an orphan (orphanConsumers.ts).
    metadata: { [SESSIONS_BUCKET_KEY]: o.bucket },
    ...(o.pinned ? PINNED : {}),
  };
}
