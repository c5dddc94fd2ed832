import type { AccountServices } from "../accountServices.js";
import type { SessionStore, StoredSession } from "./sessionStore.js";

/**
 * Sessions in the account's `sessions_bucket` KV, shared by every gateway that uses the
 * bucket: a client that reconnects to another gateway finds its session there.
 */
export class KvSessionStore implements SessionStore {
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
    const kv = await this.services.sessionsBucket(account);
    await kv.put(sessionKey(clientId), JSON.stringify(session));
  }

  async remove(account: string, clientId: string): Promise<void> {
    const kv = await this.services.sessionsBucket(account);
    await kv.delete(sessionKey(clientId));
  }
}

/** KV keys allow `[-/_=.a-zA-Z0-9]`; a client id may hold anything, so it is base64url. */
export function sessionKey(clientId: string): string {
  return Buffer.from(clientId, "utf8").toString("base64url") || "_";
}
