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

/** One session's claim of its client id; `release()` when the session ends (an object, not a closure per connection). */
export class Claim {
  ended = false;
  /** Who waits for this session to end; made when someone does. */
  onEnd: Array<() => void> | undefined = undefined;

  constructor(
    private readonly directory: SessionDirectory,
    readonly key: string,
    /** The session this one waits for; undefined once every earlier one has ended. */
    public before: Claim | undefined,
  ) {}

  /** The session ended, whatever state it ended in: the next claim of the id may go on. Once. */
  release(): void {
    if (this.ended) return;
    this.ended = true;
    this.directory.released(this);
  }
}

export class SessionDirectory {
  private readonly latest = new Map<string, Claim>();
  /** Stored subscriptions of sessions whose connection ended here, kept for a resume here. */
  readonly parked = new ParkedDeliveries();

  /**
   * Claims the client id for `claimant`; it hears `claimed()` when the session before it
   * (which waited for the ones before it) has ended, at once when there is none. Returns
   * what the session calls when it ends, whatever state it ends in.
   */
  claim(account: string, clientId: string, claimant: Claimant): Claim {
    const key = keyOf(account, clientId);
    const last = this.latest.get(key);
    const entry = new Claim(this, key, last && !last.ended ? last : undefined);
    this.latest.set(key, entry);
    if (entry.before) {
      entry.before.onEnd ??= [];
      entry.before.onEnd.push(() => {
        entry.before = undefined;
        claimant.claimed();
      });
    } else claimant.claimed();
    return entry;
  }

  /** @internal (Claim's) */
  released(entry: Claim): void {
    const { key } = entry;
    if (this.latest.get(key) === entry) {
      if (entry.before) this.latest.set(key, entry.before);
      else this.latest.delete(key);
    }
    const waiting = entry.onEnd?.splice(0) ?? [];
    // Ended before its turn came (its connection went while it waited): whoever waits
    // for it still waits for the sessions it was waiting for.
    if (entry.before) {
      entry.before.onEnd ??= [];
      entry.before.onEnd.push(...waiting);
    } else for (const next of waiting) next();
  }

  /** Resolves once no session of the client id is open here (another gateway asked for it). */
  whenReleased(account: string, clientId: string): Promise<void> {
    const entry = this.latest.get(keyOf(account, clientId));
    if (!entry || entry.ended) return Promise.resolve();
    return new Promise((resolve) => {
      entry.onEnd ??= [];
      entry.onEnd.push(resolve);
    });
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
