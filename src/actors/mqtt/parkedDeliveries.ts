import type { StoredSession } from "./sessionStore.js";
import type { StoredDelivery } from "./storedDelivery.js";

/** One detached session's parked stored subscriptions, as its last connection left them. */
export interface ParkedSession {
  /** The session's epoch (the one its consumers are named from). */
  readonly epoch: string | undefined;
  /** The revision of the detached record this gateway wrote: only a resume that reads it may adopt them. */
  readonly revision: number;
  /** That record, as written: a resume here starts from it without reading the bucket. */
  readonly record: StoredSession;
  /** By filter. */
  readonly byFilter: Map<string, StoredDelivery>;
}

/**
 * The stored subscriptions of sessions whose connection ended here with nothing
 * unacknowledged, parked (machines/storedDelivery.ts): a resume here that reads the record
 * this gateway wrote when they parked adopts them and reads on with no JetStream request,
 * where a takeover costs two per filter (UNPIN, RESET) (docs/decisions/session-parking.md).
 * Anything else that touches the session first (a resume elsewhere, a clean start, another
 * record, the park's time running out) stops them, and the next resume takes their
 * consumers over as it would have.
 */
export class ParkedDeliveries {
  private readonly sessions = new Map<string, ParkedSession>();
  /**
   * Readers paused at their connection's end whose record is still being written: parked
   * once it is, unless the client id is dropped meanwhile. Another gateway that asks for
   * the session (or claims the client id) while that write is under way must stop them
   * too: parked after its takeover, they would keep their pulls, take what the consumer
   * hands back from the reset floor, and hold it for nobody.
   */
  private readonly parking = new Map<string, ReadonlyMap<string, StoredDelivery>>();

  /** `byFilter` will be parked for the client id once its record is written (`park`), unless dropped first. */
  parkingBegins(account: string, clientId: string, byFilter: ReadonlyMap<string, StoredDelivery>): void {
    const key = keyOf(account, clientId);
    const earlier = this.parking.get(key);
    if (earlier && earlier !== byFilter) for (const stored of earlier.values()) stored.stop();
    this.parking.set(key, byFilter);
  }

  /**
   * Parks `session` (replacing, and stopping, what was parked for the client id), or stops
   * its readers when the client id was dropped since their parking began; undefined record:
   * it was not written, and they stop.
   */
  park(
    account: string,
    clientId: string,
    session: ParkedSession | undefined,
    byFilter: ReadonlyMap<string, StoredDelivery>,
  ): void {
    const key = keyOf(account, clientId);
    const ours = this.parking.get(key) === byFilter;
    if (ours) this.parking.delete(key);
    if (!ours || !session) {
      for (const stored of byFilter.values()) stored.stop();
      return;
    }
    this.drop(account, clientId);
    this.sessions.set(key, session);
  }

  /** A parked subscription stopped by itself (its time ran out, its consumer was lost). */
  forget(account: string, clientId: string, filter: string, stored: StoredDelivery): void {
    const key = keyOf(account, clientId);
    const parked = this.sessions.get(key);
    if (parked?.byFilter.get(filter) !== stored) return;
    parked.byFilter.delete(filter);
    if (parked.byFilter.size === 0) this.sessions.delete(key);
  }

  /** The record a resume of the client id would adopt from, if any is parked; it stays parked. */
  recordOf(
    account: string,
    clientId: string,
  ): { readonly record: StoredSession; readonly revision: number } | undefined {
    return this.sessions.get(keyOf(account, clientId));
  }

  /** The parked record at `from` was written again, at `to`, by a resume here (parkedHold.ts). */
  rewritten(account: string, clientId: string, from: number, to: number): void {
    const key = keyOf(account, clientId);
    const parked = this.sessions.get(key);
    if (parked?.revision === from) this.sessions.set(key, { ...parked, revision: to });
  }

  /** What a resume of the client id may adopt; no longer parked here either way. */
  take(account: string, clientId: string): ParkedSession | undefined {
    const key = keyOf(account, clientId);
    const parked = this.sessions.get(key);
    this.sessions.delete(key);
    return parked;
  }

  /** The client id is someone else's to resume now (a clean start, a claim from another gateway). */
  drop(account: string, clientId: string): void {
    const parked = this.take(account, clientId);
    if (parked) for (const stored of parked.byFilter.values()) stored.stop();
    const key = keyOf(account, clientId);
    const pausing = this.parking.get(key);
    this.parking.delete(key);
    if (pausing) for (const stored of pausing.values()) stored.stop();
  }

  /** The gateway stops. */
  stopAll(): void {
    for (const parked of this.sessions.values()) for (const stored of parked.byFilter.values()) stored.stop();
    for (const pausing of this.parking.values()) for (const stored of pausing.values()) stored.stop();
    this.sessions.clear();
    this.parking.clear();
  }

  /** Parked subscriptions now. */
  get size(): number {
    let n = 0;
    for (const parked of this.sessions.values()) n += parked.byFilter.size;
    return n;
  }
}

const keyOf = (account: string, clientId: string) => `${account}\u0000${clientId}`;
