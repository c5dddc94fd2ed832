import { KvWatchInclude } from "@nats-io/kv";
import type { AccountServices } from "../accountServices.js";
import { sessionKey } from "../mqtt/kvSessionStore.js";
import { recordedConsumer } from "../mqtt/sessionConsumers.js";
import type { SessionStore, StoredSession } from "../mqtt/sessionStore.js";

/** At most this many sessions in one `sessions` reply, and no more than fit in one NATS message. */
export const SESSIONS_MAX = 10_000;

export interface SessionEntry {
  readonly client_id: string;
  readonly connected: boolean;
  /** The gateway holding its connection (or that held it last). */
  readonly gateway: string | null;
  /** RFC 3339; while connected, the expiry counted from the last save. */
  readonly expires_at: string;
  readonly expiry_sec: number | null;
  readonly subscriptions: Array<{
    filter: string;
    qos: number;
    stream?: string;
    consumer?: string;
    /** `sessions.show` only: what waits in its consumer, and what went out unacknowledged. */
    pending?: number;
    ack_pending?: number;
  }>;
}

/** Sweep lock and other keys that are not a session: base64url never holds a dot. */
const isSessionKey = (key: string) => !key.includes(".");

/** The records of one account's sessions bucket, in one pass of a watch (not a get per key). */
export async function readSessions(
  services: AccountServices,
  account: string,
): Promise<Array<{ clientId: string; session: StoredSession }>> {
  const kv = await services.sessionsBucket(account);
  const out: Array<{ clientId: string; session: StoredSession }> = [];
  if ((await kv.status()).values === 0) return out;
  const watch = await kv.watch({ include: KvWatchInclude.LastValue });
  try {
    for await (const e of watch) {
      if (e.operation === "PUT" && isSessionKey(e.key) && e.value.byteLength > 0) {
        try {
          out.push({ clientId: Buffer.from(e.key, "base64url").toString("utf8"), session: e.json<StoredSession>() });
        } catch {
          // Not a session record.
        }
      }
      if (e.delta === 0) break;
    }
  } finally {
    watch.stop();
  }
  return out.sort((a, b) => a.clientId.localeCompare(b.clientId));
}

/** One session's record, or undefined when the bucket holds none (or an expired one). */
export async function readSession(
  services: AccountServices,
  account: string,
  clientId: string,
): Promise<{ session: StoredSession; revision: number } | undefined> {
  const kv = await services.sessionsBucket(account);
  const entry = await kv.get(sessionKey(clientId));
  if (entry?.operation !== "PUT" || entry.value.byteLength === 0) return undefined;
  return { session: entry.json<StoredSession>(), revision: entry.revision };
}

export function sessionEntry(clientId: string, s: StoredSession): SessionEntry {
  return {
    client_id: clientId,
    connected: s.connected === true,
    gateway: s.owner ?? null,
    expires_at: new Date(s.expiresAt).toISOString(),
    expiry_sec: s.expirySec ?? null,
    subscriptions: s.subscriptions.map((sub) => ({
      filter: sub.subscription.topic,
      qos: sub.subscription.qos,
      ...(sub.stream ? { stream: sub.stream } : {}),
      ...(sub.consumer ? { consumer: sub.consumer } : {}),
    })),
  };
}

/** `sessions`: the account's sessions, cut where the reply would pass one NATS message. */
export async function sessionsReply(
  services: AccountServices,
  id: string,
  account: string,
  clientId: string | undefined,
  maxBytes: number,
): Promise<object> {
  const all = (await readSessions(services, account)).filter((r) => clientId === undefined || r.clientId === clientId);
  let size = Buffer.byteLength(JSON.stringify({ id, account, sessions: [], count: all.length, truncated: false }));
  const sessions: SessionEntry[] = [];
  for (const r of all) {
    if (sessions.length >= SESSIONS_MAX) break;
    const entry = sessionEntry(r.clientId, r.session);
    const more = Buffer.byteLength(JSON.stringify(entry)) + (sessions.length > 0 ? 1 : 0);
    if (size + more > maxBytes) break;
    size += more;
    sessions.push(entry);
  }
  return { id, account, sessions, count: all.length, truncated: sessions.length < all.length };
}

/** `sessions.show`: one session with what waits in each of its consumers. */
export async function sessionShowReply(
  services: AccountServices,
  id: string,
  account: string,
  clientId: string,
): Promise<object> {
  const found = await readSession(services, account, clientId);
  if (!found)
    return {
      id,
      account,
      found: false,
      reason: `no session of client ${JSON.stringify(clientId)} in account ${JSON.stringify(account)}`,
    };
  const { session } = found;
  const entry = sessionEntry(clientId, session);
  const { jsm } = await services.jetstream(account);
  const subscriptions = await Promise.all(
    session.subscriptions.map(async (s, i) => {
      const shown = entry.subscriptions[i]!;
      if (!s.stream) return shown;
      const consumer = recordedConsumer(s, account, clientId, session.epoch);
      const info = await jsm.consumers.info(s.stream, consumer).catch(() => undefined);
      return info
        ? { ...shown, consumer, pending: info.num_pending, ack_pending: info.num_ack_pending }
        : { ...shown, consumer };
    }),
  );
  return { id, account, found: true, session: { ...entry, subscriptions } };
}

/** Deletes a session's consumers, then its record (whatever revision it is at): how many consumers went. */
export async function deleteSession(
  services: AccountServices,
  store: Pick<SessionStore, "remove">,
  account: string,
  clientId: string,
): Promise<number> {
  const found = await readSession(services, account, clientId);
  let consumers = 0;
  if (found) {
    const { jsm } = await services.jetstream(account);
    const results = await Promise.all(
      found.session.subscriptions
        .filter((s) => s.stream)
        .map((s) =>
          jsm.consumers
            .delete(s.stream!, recordedConsumer(s, account, clientId, found.session.epoch))
            .catch(() => false),
        ),
    );
    consumers = results.filter((r) => r === true).length;
  }
  // The store's removal: a marker every gateway's key index hears, which itself expires.
  await store.remove(account, clientId);
  return consumers;
}
