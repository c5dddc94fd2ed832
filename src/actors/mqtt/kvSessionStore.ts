import { KvWatchInclude } from "@nats-io/kv";
import type { AccountServices } from "../accountServices.js";
import type { SessionStore, StoredSession } from "./sessionStore.js";

/** The keys of one account's sessions bucket, as far as this gateway has seen them. */
interface KeyIndex {
  readonly keys: Set<string>;
  /** Listed the bucket, and follows its writes: an absent key is known to be absent. */
  synced: boolean;
  /** A failed index is tried again only after this (Unix ms). */
  retryAt: number;
}

const RETRY_MS = 10_000;

/**
 * Sessions in the account's `sessions_bucket` KV, shared by every gateway that uses the
 * bucket: a client that reconnects to another gateway finds its session there.
 */
export class KvSessionStore implements SessionStore {
  private readonly indexes = new Map<string, KeyIndex>();

  constructor(private readonly services: AccountServices) {}

  async load(account: string, clientId: string): Promise<StoredSession | undefined> {
    const kv = await this.services.sessionsBucket(account);
    const entry = await kv.get(sessionKey(clientId));
    if (entry?.operation !== "PUT" || entry.value.byteLength === 0) return undefined;
    const session = entry.json<StoredSession>();
    if (!session.connected && session.expiresAt <= Date.now()) {
      await kv.delete(sessionKey(clientId)).catch(() => {});
      return { ...session, subscriptions: session.subscriptions, expiresAt: 0 };
    }
    return session;
  }

  async save(account: string, clientId: string, session: StoredSession): Promise<void> {
    // Known at once here, before the bucket's echo comes back through the watch.
    this.indexes.get(account)?.keys.add(sessionKey(clientId));
    const kv = await this.services.sessionsBucket(account);
    await kv.put(sessionKey(clientId), JSON.stringify(session));
  }

  async remove(account: string, clientId: string): Promise<void> {
    const kv = await this.services.sessionsBucket(account);
    await kv.delete(sessionKey(clientId));
  }

  /**
   * False only when the bucket is known to hold no session of this client: the gateway
   * listed the bucket's keys and follows its writes (docs/decisions/mqtt-sessions.md,
   * "Clean starts without a bucket read"). Errs towards true: then the bucket is read.
   */
  mayHold(account: string, clientId: string): boolean {
    const idx = this.indexes.get(account);
    if (!idx) {
      void this.follow(account);
      return true;
    }
    if (!idx.synced) {
      if (idx.retryAt > 0 && Date.now() >= idx.retryAt) void this.follow(account);
      return true;
    }
    return idx.keys.has(sessionKey(clientId));
  }

  /** Watches the bucket's writes first, then lists its keys, so no write falls between the two. */
  private async follow(account: string): Promise<void> {
    const idx: KeyIndex = { keys: new Set(), synced: false, retryAt: 0 };
    this.indexes.set(account, idx);
    const failed = () => {
      idx.synced = false;
      idx.keys.clear();
      idx.retryAt = Date.now() + RETRY_MS;
    };
    try {
      const kv = await this.services.sessionsBucket(account);
      const writes = await kv.watch({ include: KvWatchInclude.UpdatesOnly, headers_only: true });
      void (async () => {
        try {
          for await (const e of writes) {
            if (e.operation === "PUT") idx.keys.add(e.key);
            else idx.keys.delete(e.key);
          }
        } catch {
          // ended below
        }
        // Not followed any more: read the bucket again until a new index is synced.
        if (this.indexes.get(account) === idx) failed();
      })();
      // A key listed after its delete came through stays: a needless read, never a missed session.
      for await (const k of await kv.keys()) idx.keys.add(k);
      if (this.indexes.get(account) === idx && idx.retryAt === 0) idx.synced = true;
    } catch {
      if (this.indexes.get(account) === idx) failed();
    }
  }
}

/** KV keys allow `[-/_=.a-zA-Z0-9]`; a client id may hold anything, so it is base64url. */
export function sessionKey(clientId: string): string {
  return Buffer.from(clientId, "utf8").toString("base64url") || "_";
}
