/**
 * The reference: MQTT session semantics as the gateway promises them, small enough to
 * trust by reading (docs/decisions/mqtt-sessions.md):
 *
 * - a session outlives its connection only when the connection asked for it (3.1.1
 *   clean session 0, MQTT 5 session expiry > 0; the tests pair the two);
 * - CONNACK says "session present" exactly when such a session was there to resume;
 * - a message reaches every client online with a matching subscription, at
 *   min(publish QoS, subscription QoS);
 * - a QoS 1/2 message for a kept session with a QoS 1/2 subscription that is offline
 *   waits, and is delivered when the session resumes; a clean start drops what waited.
 *   Topic 1 is kept by the stream its subjects are bound to, topic 0 (no binding) by the
 *   MQTT store (docs/decisions/mqtt-store.md). QoS 0 is never kept;
 * - however a connection ends (DISCONNECT, a dropped socket, a kick, a takeover), the
 *   session is what that connection's own clean flag says.
 */
export type Qos = 0 | 1 | 2;
export const CLIENTS = ["a", "b"] as const;
export type Name = (typeof CLIENTS)[number];
export const TOPICS = 2;
/** The topic whose subjects a bound stream stores (the other one's go to the MQTT store). */
export const STORED_TOPIC = 1;

export interface ClientState {
  online: boolean;
  /** The session outlives the connection. */
  persistent: boolean;
  /** Subscriptions of the current session, by topic index. */
  readonly subs: Map<number, Qos>;
  /** Stored messages waiting for the session to resume: payload -> QoS it is owed at. */
  readonly waiting: Map<string, Qos>;
}

export class SessionModel {
  readonly clients: Record<Name, ClientState> = {
    a: { online: false, persistent: false, subs: new Map(), waiting: new Map() },
    b: { online: false, persistent: false, subs: new Map(), waiting: new Map() },
  };
  /** NATS restarts so far in this sequence (they are costly: at most one per sequence). */
  restarts = 0;

  /**
   * A new connection for `name` (taking over an online one); answers "session present"
   * and the stored messages the resumed session must now deliver.
   */
  connect(name: Name, clean: boolean): { present: boolean; owed: Map<string, Qos> } {
    const c = this.clients[name];
    if (c.online) this.connectionEnded(name);
    const present = !clean && c.persistent;
    const owed = present ? new Map(c.waiting) : new Map<string, Qos>();
    c.waiting.clear();
    if (!present) c.subs.clear();
    c.persistent = !clean;
    c.online = true;
    return { present, owed };
  }

  connectionEnded(name: Name): void {
    const c = this.clients[name];
    c.online = false;
    if (!c.persistent) {
      c.subs.clear();
      c.waiting.clear();
    }
  }

  subscribe(name: Name, topic: number, qos: Qos): void {
    this.clients[name].subs.set(topic, qos);
  }

  unsubscribe(name: Name, topic: number): void {
    this.clients[name].subs.delete(topic);
  }

  /** A message published on `topic`: who gets it now, and at which QoS; kept sessions offline keep it for later. */
  publish(payload: string, topic: number, qos: Qos): Map<Name, Qos> {
    const now = new Map<Name, Qos>();
    for (const name of CLIENTS) {
      const c = this.clients[name];
      const sub = c.subs.get(topic);
      if (sub === undefined) continue;
      const at = Math.min(qos, sub) as Qos;
      if (c.online) now.set(name, at);
      else if (at > 0) c.waiting.set(payload, at);
    }
    return now;
  }
}
