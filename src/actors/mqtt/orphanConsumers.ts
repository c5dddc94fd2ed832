import type { JetStreamManager } from "@nats-io/jetstream";
import { recordedConsumer } from "./sessionConsumers.js";
import { SESSIONS_BUCKET_KEY, type StoredSession } from "./sessionStore.js";

/**
 * What storedDelivery.ts names a session's consumers: `mqgw-` and 24 hex digits, then, for a
 * session with an epoch, `-` and 8 more. AMQP's durable subscriptions (`mqgw-amqp-...`) and
 * operators' consumers never match.
 */
const SESSION_CONSUMER = /^mqgw-[0-9a-f]{24}(-[0-9a-f]{8})?$/;

/**
 * The consumers the sessions bucket names, whatever their stream (the names are unique): a
 * record from before epochs names none and reads the one its filter names. Undefined when a
 * stored subscription's consumer cannot be told (an epoch without a name): nothing is an
 * orphan then.
 */
export function namedConsumers(
  account: string,
  sessions: Iterable<[clientId: string, StoredSession]>,
): Set<string> | undefined {
  const named = new Set<string>();
  for (const [clientId, s] of sessions)
    for (const sub of s.subscriptions ?? []) {
      if (!sub.stream) continue;
      if (!sub.consumer && s.epoch !== undefined) return undefined;
      named.add(recordedConsumer(sub, account, clientId, s.epoch));
    }
  return named;
}

/**
 * Deletes the session consumers of `bucket` on `streams` that no record names and that are
 * older than `graceMs`: those a crash or a lost answer left behind mid-resume or mid-removal
 * (each would stay until its inactive threshold, the session's expiry, holding messages on an
 * interest stream). A younger one may belong to a resume still writing its record (the record
 * names a consumer only once it exists). Returns how many went; a stream that cannot be
 * listed is left for the next pass.
 */
export async function removeOrphanConsumers(
  jsm: JetStreamManager,
  streams: Iterable<string>,
  bucket: string,
  named: ReadonlySet<string>,
  now: number,
  graceMs: number,
): Promise<number> {
  let removed = 0;
  for (const stream of streams) {
    const orphans: string[] = [];
    try {
      for await (const c of jsm.consumers.list(stream)) {
        if (!SESSION_CONSUMER.test(c.name) || named.has(c.name)) continue;
        if (c.config.metadata?.[SESSIONS_BUCKET_KEY] !== bucket) continue;
        if (now - Date.parse(c.created) < graceMs) continue;
        orphans.push(c.name);
      }
    } catch {
      continue;
    }
    for (const name of orphans) {
      // One already gone (another gateway's pass, its inactive threshold) is not an error.
      if (await jsm.consumers.delete(stream, name).catch(() => false)) removed++;
    }
  }
  return removed;
}
