import { ParkedDeliveries } from "./parkedDeliveries.js";

/**
 * The MQTT sessions open on this gateway, by account and client id, so that two sessions
 * of one client id never act at once: a new session claims the id and is told CLAIMED only
 * once every earlier one has been saved or removed (mqttSession.ts `claiming`). A client
 * that reconnects at once, or twenty times in a row, gets its sessions one after another,
 * each reading what the one before it left.
 */
export interface Claimant {
  /** Every earlier session of the id has ended: this one may read the store. */
  claimed(): void;
}

interface Entry {
  ended: boolean;
  /** The session this one waits for; undefined once every earlier one has ended. */
  before: Entry | undefined;
  readonly onEnd: Array<() => void>;
}

export class SessionDirectory {
  private readonly latest = new Map<string, Entry>();
  /** Stored subscriptions of sessions whose connection ended here, kept for a resume here. */
  readonly parked = new ParkedDeliveries();

  /**
   * Claims the client id for `claimant`; it hears `claimed()` when the session before it
   * (which waited for the ones before it) has ended, at once when there is none. Returns
   * what the session calls when it ends, whatever state it ends in.
   */
  claim(account: string, clientId: string, claimant: Claimant): () => void {
    const key = keyOf(account, clientId);
    const last = this.latest.get(key);
    const entry: Entry = { ended: false, before: last && !last.ended ? last : undefined, onEnd: [] };
    this.latest.set(key, entry);
    if (entry.before)
      entry.before.onEnd.push(() => {
        entry.before = undefined;
        claimant.claimed();
      });
    else claimant.claimed();
    return () => {
      if (entry.ended) return;
      entry.ended = true;
      if (this.latest.get(key) === entry) {
        if (entry.before) this.latest.set(key, entry.before);
        else this.latest.delete(key);
      }
      const waiting = entry.onEnd.splice(0);
      // Ended before its turn came (its connection went while it waited): whoever waits
      // for it still waits for the sessions it was waiting for.
      if (entry.before) entry.before.onEnd.push(...waiting);
      else for (const next of waiting) next();
    };
  }

  /** Resolves once no session of the client id is open here (another gateway asked for it). */
  whenReleased(account: string, clientId: string): Promise<void> {
    const entry = this.latest.get(keyOf(account, clientId));
    if (!entry || entry.ended) return Promise.resolve();
    return new Promise((resolve) => entry.onEnd.push(resolve));
  }

  /** Whether a session of the client id is open here. */
  holds(account: string, clientId: string): boolean {
    const entry = this.latest.get(keyOf(account, clientId));
    return entry !== undefined && !entry.ended;
  }

  /** Sessions open now (tests and metrics). */
  size(): number {
    return this.latest.size;
  }
}

const keyOf = (account: string, clientId: string) => `${account}\u0000${clientId}`;
