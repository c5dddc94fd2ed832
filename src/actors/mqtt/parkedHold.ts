import type { ParkedDeliveries } from "./parkedDeliveries.js";
import type { LoadedSession, SessionStore, StoredSession } from "./sessionStore.js";

/**
 * A resume's hold of the record this gateway wrote when the session's last connection here
 * ended, while its stored subscriptions are still parked here (docs/decisions/session-parking.md):
 * the record is written back held by the new connection, on the condition that nobody wrote
 * it since. One request stands for the read and for most of takeRecord's write.
 */
export class ParkedHold {
  /** What was asked to be written, from which parked record, answered or not. */
  private asked:
    | { readonly held: StoredSession; readonly record: StoredSession; readonly revision: number }
    | undefined;
  /** The record written as the connection's, once known: takeRecord writes again only what the resume changed. */
  held: StoredSession | undefined;

  constructor(
    private readonly deps: {
      readonly store: SessionStore;
      readonly gatewayId: string;
      readonly parked: ParkedDeliveries;
    },
    private readonly account: string,
    private readonly clientId: string,
    private readonly expirySec: number,
  ) {}

  /**
   * Undefined: nothing is parked, or the write did not happen (someone wrote since, the
   * store did not answer): the caller reads the bucket, and `recognise`s what it read.
   */
  async hold(): Promise<LoadedSession | undefined> {
    const { account, clientId, deps } = this;
    const parked = deps.parked.recordOf(account, clientId);
    if (!parked) return undefined;
    const { record, revision } = parked;
    // Expired while parked: discarded as read (its consumers first), nothing to hold.
    if (record.expiresAt <= Date.now()) return { session: record, revision, expired: true };
    const { outbound: _leftInFlight, ...kept } = record;
    const held: StoredSession = {
      ...kept,
      expiresAt: Date.now() + this.expirySec * 1000,
      expirySec: this.expirySec,
      owner: deps.gatewayId,
      connected: true,
    };
    this.asked = { held, record, revision };
    let written: number;
    try {
      written = await deps.store.save(account, clientId, held, { revision });
    } catch {
      return undefined;
    }
    return this.heldAs(written);
  }

  /**
   * The record read after the write went unanswered (a JetStream request timed out, its write
   * may still have landed): if it is that write, the resume goes on as if it had been
   * answered, adopting the parked readers, instead of taking their consumers over.
   */
  recognise(found: LoadedSession | undefined): LoadedSession | undefined {
    const asked = this.asked;
    if (!asked || !found || found.revision === asked.revision) return found;
    return JSON.stringify(found.session) === JSON.stringify(asked.held) ? this.heldAs(found.revision) : found;
  }

  /** The write is the record at `written`: the parked readers are that record's now. */
  private heldAs(written: number): LoadedSession {
    const asked = this.asked!;
    this.deps.parked.rewritten(this.account, this.clientId, asked.revision, written);
    this.held = asked.held;
    // The parked record, with what the last connection left in flight (a held one omits it).
    return { session: asked.record, revision: written, expired: false };
  }
}
