import type { Msg, NatsConnection, Subscription } from "@nats-io/transport-node";

/** One holder's part in a core subscription: what an MQTT subscription keeps per NATS subject. */
export interface CoreInterest {
  getSubject(): string;
  unsubscribe(): void;
  /**
   * Gives the interest up, but a SUB left with no holder stays `lingerMs` for one that
   * comes back (a persistent session resuming here). Absent: only `unsubscribe`.
   */
  leave?(lingerMs: number): void;
  /**
   * NATS answered its SUB and granted it (a PONG came after it, no refusal before): a client
   * that joins it later needs no round trip of its own to know. Absent: never known so.
   */
  granted?(): boolean;
}

/** How often SUBs left lingering are looked at: they go at most this late. */
const LINGER_SWEEP_MS = 1_000;

/**
 * The core (non-queue) subscriptions of one NATS connection, shared by every client on it
 * that subscribes to the same subject: one SUB while at least one holds it, each message
 * handed to every holder in the order they joined. Clients on one connection present the
 * same credentials, so NATS's verdict on a subject is the same for all of them.
 *
 * Before, each MQTT subscription had a SUB of its own: a fleet subscribed to `fleet/all/#`
 * was 2 SUBs per device (`fleet.all.>`, `fleet.all`), a wildcard insert and removal in
 * nats-server's sublist per connect and per drop (a quarter of its CPU in a storm's drop),
 * and every message on them came to the gateway once per device to be parsed by nats.js
 * (docs/decisions/shared-core-subscriptions.md).
 */
export class SharedSubscriptions {
  private readonly bySubject = new Map<string, SharedSubscription>();
  /** SUBs no holder has now, and until when (Date.now()) each stays for one that comes back. */
  private readonly lingering = new Map<SharedSubscription, number>();
  private sweeper: ReturnType<typeof setInterval> | undefined;
  /** SUBs whose verdict has not come back yet: sent, or sent again by a reconnect. */
  private readonly unheard = new Set<SharedSubscription>();

  /** `verdict`: resolves once NATS answered everything sent so far, and its refusals were told. */
  constructor(
    private readonly nc: NatsConnection,
    private readonly verdict: () => Promise<void>,
  ) {
    this.followReconnects().catch(() => {
      // The status stream ends with the connection.
    });
  }

  /** `deliver` hears every message on `subject` from now until its interest is given up. */
  join(subject: string, deliver: (m: Msg) => void): CoreInterest {
    let shared = this.bySubject.get(subject);
    if (!shared) {
      shared = new SharedSubscription(this, subject);
      shared.sub = this.nc.subscribe(subject, { callback: shared.callback });
      this.bySubject.set(subject, shared);
      this.awaitVerdict([shared]);
    }
    const interest = new Interest(shared, deliver);
    shared.holders.add(interest);
    return interest;
  }

  /** Granted by NATS, as far as this connection heard (CoreInterest.granted). */
  granted(shared: SharedSubscription): boolean {
    return this.bySubject.get(shared.subject) === shared && !this.unheard.has(shared);
  }

  /** NATS refused or removed it: whoever subscribes next sends a SUB of its own and hears its own verdict. */
  forget(shared: SharedSubscription): void {
    if (this.bySubject.get(shared.subject) === shared) this.bySubject.delete(shared.subject);
    this.lingering.delete(shared);
    this.unheard.delete(shared);
  }

  /** Unheard until NATS answered a PING after them (shared with every confirm of the turn). */
  private awaitVerdict(subs: SharedSubscription[]): void {
    for (const shared of subs) this.unheard.add(shared);
    this.verdict().then(
      () => {
        for (const shared of subs) this.unheard.delete(shared);
      },
      () => {
        // Not answered (closed, reconnecting): they stay unheard; a reconnect asks again.
      },
    );
  }

  /**
   * Away, the SUBs are at no server; nats.js sends each again on a reconnect, and the server
   * there may judge them otherwise: unheard from the disconnect until that verdict.
   */
  private async followReconnects(): Promise<void> {
    for await (const s of this.nc.status()) {
      if (s.type === "disconnect") for (const shared of this.bySubject.values()) this.unheard.add(shared);
      else if (s.type === "reconnect") this.awaitVerdict([...this.bySubject.values()]);
    }
  }

  /** Its last holder left: unsubscribed once `until` has passed with nobody back. */
  linger(shared: SharedSubscription, until: number): void {
    this.lingering.set(shared, Math.max(until, this.lingering.get(shared) ?? 0));
    this.sweeper ??= setInterval(() => this.sweep(), LINGER_SWEEP_MS);
    this.sweeper.unref?.();
  }

  private sweep(): void {
    const now = Date.now();
    for (const [shared, until] of this.lingering) {
      if (shared.holders.size > 0) this.lingering.delete(shared);
      else if (now >= until) shared.end();
    }
    if (this.lingering.size > 0) return;
    clearInterval(this.sweeper);
    this.sweeper = undefined;
  }
}

class SharedSubscription {
  sub: Subscription | undefined;
  /** In the order they joined; a holder that leaves during a delivery is not handed the rest. */
  readonly holders = new Set<Interest>();

  constructor(
    private readonly owner: SharedSubscriptions,
    readonly subject: string,
  ) {}

  readonly callback = (e: Error | null, m: Msg): void => {
    // A permission violation: nats.js closes the subscription; every client on the
    // connection is told through the connection's status (natsSeam.ts, permissionDenied).
    if (e) return this.owner.forget(this);
    for (const h of this.holders) h.deliver(m);
  };

  granted(): boolean {
    return this.owner.granted(this);
  }

  leave(interest: Interest, lingerMs: number): void {
    if (!this.holders.delete(interest) || this.holders.size > 0) return;
    if (lingerMs > 0) this.owner.linger(this, Date.now() + lingerMs);
    else this.end();
  }

  /** The UNSUB: whoever joins the subject after this sends a SUB of its own. */
  end(): void {
    this.owner.forget(this);
    this.sub?.unsubscribe();
  }
}

class Interest implements CoreInterest {
  constructor(
    private readonly shared: SharedSubscription,
    readonly deliver: (m: Msg) => void,
  ) {}

  getSubject(): string {
    return this.shared.subject;
  }

  unsubscribe(): void {
    this.shared.leave(this, 0);
  }

  leave(lingerMs: number): void {
    this.shared.leave(this, lingerMs);
  }

  granted(): boolean {
    return this.shared.granted();
  }
}
