import type { Msg, NatsConnection, Subscription } from "@nats-io/transport-node";

/** One holder's part in a core subscription: what an MQTT subscription keeps per NATS subject. */
export interface CoreInterest {
  getSubject(): string;
  unsubscribe(): void;
}

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

  constructor(private readonly nc: NatsConnection) {}

  /** `deliver` hears every message on `subject` from now until its interest is given up. */
  join(subject: string, deliver: (m: Msg) => void): CoreInterest {
    let shared = this.bySubject.get(subject);
    if (!shared) {
      shared = new SharedSubscription(this, subject);
      shared.sub = this.nc.subscribe(subject, { callback: shared.callback });
      this.bySubject.set(subject, shared);
    }
    const interest = new Interest(shared, deliver);
    shared.holders.add(interest);
    return interest;
  }

  /** NATS refused or removed it: whoever subscribes next sends a SUB of its own and hears its own verdict. */
  forget(shared: SharedSubscription): void {
    if (this.bySubject.get(shared.subject) === shared) this.bySubject.delete(shared.subject);
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

  leave(interest: Interest): void {
    if (!this.holders.delete(interest) || this.holders.size > 0) return;
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
    this.shared.leave(this);
  }
}
