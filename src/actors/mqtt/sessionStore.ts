import type { ISubscription } from "mqtt-packet";
import type { InboundRecord } from "./inboundState.js";

/** What survives a disconnect of a client with a session expiry. */
export interface StoredSession {
  readonly subscriptions: ReadonlyArray<{ subscription: ISubscription; subscriptionId: number | undefined; stream?: string | undefined }>;
  /** Unix ms; while connected, now + the session expiry, refreshed on each save. */
  readonly expiresAt: number;
  /** The gateway holding the client's connection, and whether it is connected now. */
  readonly owner?: string | undefined;
  readonly connected?: boolean | undefined;
  /** The client's QoS 1/2 publishes not yet acknowledged, and QoS 2 ones waiting for PUBREL (inboundState.ts). */
  readonly inbound?: InboundRecord | undefined;
}

/** Where MQTT sessions live: the KV bucket in production, memory when no JetStream is there. */
export interface SessionStore {
  load(account: string, clientId: string): Promise<StoredSession | undefined>;
  save(account: string, clientId: string, session: StoredSession): Promise<void>;
  remove(account: string, clientId: string): Promise<void>;
  /**
   * False when the store knows, without reading, that it holds no session of this client
   * (a clean start then skips the read); true or absent: read it.
   */
  mayHold?(account: string, clientId: string): boolean;
}

export class MemorySessionStore implements SessionStore {
  private readonly sessions = new Map<string, StoredSession>();

  async load(account: string, clientId: string): Promise<StoredSession | undefined> {
    const key = `${account}\u0000${clientId}`;
    const s = this.sessions.get(key);
    if (s && s.expiresAt <= Date.now()) {
      this.sessions.delete(key);
      return undefined;
    }
    return s;
  }

  async save(account: string, clientId: string, session: StoredSession): Promise<void> {
    this.sessions.set(`${account}\u0000${clientId}`, session);
  }

  async remove(account: string, clientId: string): Promise<void> {
    this.sessions.delete(`${account}\u0000${clientId}`);
  }
}
