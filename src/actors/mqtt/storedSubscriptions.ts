import type { Msg } from "@nats-io/transport-node";
import type { Logger } from "../../log.js";
import { MSGS_PREFIX } from "../messageStore.js";
import type { Deliveries } from "./deliveries.js";
import type { SessionDeps } from "./deps.js";
import type { ClientLink } from "./link.js";
import type { ParkedSession } from "./parkedDeliveries.js";
import type { PullBudget } from "./pullWindow.js";
import { sessionConsumerName } from "./sessionConsumers.js";
import type { StoredSession } from "./sessionStore.js";
import { StoredDelivery } from "./storedDelivery.js";
import type { Recipient } from "./storedDeliveryOptions.js";
import type { StoredSource } from "./storedSource.js";
import type { ActiveSubscription } from "./subscriptions.js";

/** One subscription of a session: its core NATS part, and where its QoS 1/2 messages are read from. */
export interface SessionEntry {
  readonly sub: ActiveSubscription;
  /** Where its QoS 1/2 messages are read from, and by which consumer; undefined: live only. */
  readonly source: StoredSource | undefined;
  consumer: string | undefined;
  stored?: StoredDelivery;
}

/** Why a stored subscription could not start (and whether the gateway user lacks a permission, or a limit stood in the way). */
export interface StoredRefusal {
  readonly reason: string;
  readonly permission: boolean;
  readonly limit: boolean;
}

/** What of the session the stored subscriptions read and tell. */
export interface StoredSubscriptionsHost {
  readonly entries: Map<string, SessionEntry>;
  /** The epoch its consumers are named from. */
  epoch(): string | undefined;
  /** The consumer a subscription reads changed: the record names it. */
  consumerChanged(): void;
}

/**
 * The stored part of a session's subscriptions (a durable consumer each, read with the
 * gateway's user): started after NATS granted the client's subscription, parked when the
 * connection ends and the session lives on, adopted by a resume here
 * (docs/decisions/session-parking.md).
 */
export class StoredSubscriptions {
  /** Parked at the connection's end, handed to the gateway's parked deliveries once the detached record is written. */
  /** Made on the first subscription parked (most connections park none). */
  private parking: Map<string, StoredDelivery> | undefined;

  constructor(
    private readonly link: ClientLink,
    private readonly deps: SessionDeps,
    private readonly deliveries: Deliveries,
    private readonly expirySec: number,
    private readonly host: StoredSubscriptionsHost,
  ) {}

  /**
   * The durable consumer of a QoS 1/2 subscription on stored subjects, read with the
   * gateway's user, so only after NATS granted the client's subscription. `resume`: it hands
   * back from the session's floor. A store that does not answer is waited for when `waits`
   * (a resume); a SUBSCRIBE is refused in its SUBACK (docs/decisions/mqtt-store.md).
   */
  async start(
    entry: SessionEntry,
    resume: { floor: number; above: readonly number[] } | undefined,
    waits: boolean,
  ): Promise<StoredRefusal | undefined> {
    const { link, host } = this;
    const { sub, source, consumer } = entry;
    if (!source || !consumer || host.entries.get(sub.filter) !== entry) return undefined;
    const { stream } = source;
    const stored = StoredDelivery.start(
      {
        services: this.deps.services,
        account: link.account,
        stream,
        name: consumer,
        subjects: sub.subjects.map((s) => prefixOf(source) + s),
        maxAckPending: Math.min(link.settings.receiveMaximum, 65535),
        inactiveMs: this.expirySec * 1000,
        resume,
        store: source.kind === "store" ? this.deps.messages : undefined,
        registry: this.deps.registry,
      },
      this.recipient(entry),
    );
    entry.stored = stored;
    const outcome = await stored.first();
    // Closed meanwhile (UNSUBSCRIBE, the same filter subscribed again, the connection ending);
    // a reader the new subscription carried over is its own.
    if (host.entries.get(sub.filter) !== entry || sub.nats.length === 0) {
      if (entry.stored === stored) stored.stop();
      return undefined;
    }
    entry.consumer = stored.name;
    if (outcome.state === "reading" || (outcome.state === "waiting" && waits)) {
      this.deliveries.consumerReading(sub);
      return undefined;
    }
    stored.stop();
    entry.stored = undefined;
    link.metrics.jetstreamError("mqtt", "consumer");
    if (outcome.state === "waiting")
      link.log.warn({ filter: sub.filter, stream, err: outcome.reason }, "stored delivery unavailable");
    return {
      reason: outcome.reason,
      permission: outcome.state === "refused" && outcome.permission,
      limit: outcome.state === "waiting" && outcome.limit,
    };
  }

  /**
   * A resume reads on what its previous connection parked here, if it is the same consumer;
   * one it cannot adopt stops before the resume takes the consumer over.
   */
  adopt(entry: SessionEntry, parked: Map<string, StoredDelivery> | undefined): boolean {
    const { filter } = entry.sub;
    const stored = parked?.get(filter);
    if (!stored) return false;
    parked!.delete(filter);
    if (stored.name === entry.consumer && this.host.entries.get(filter) === entry) {
      // Its copies count for overlapping subscriptions before what it held goes out (overlaps.ts).
      this.deliveries.consumerReading(entry.sub);
      if (stored.adopt(this.recipient(entry))) {
        entry.stored = stored;
        return true;
      }
    }
    stored.stop();
    return false;
  }

  /**
   * A SUBSCRIBE replaced `from` with `to` (the same filter): `reader`, `from`'s, reads on for
   * `to` if it reads the same stream and subjects. False: `to` needs a consumer of its own.
   */
  carryOver(from: SessionEntry, reader: StoredDelivery | undefined, to: SessionEntry): boolean {
    if (!reader?.transferable || !from.source || from.source.stream !== to.source?.stream) return false;
    if (from.sub.subjects.join(" ") !== to.sub.subjects.join(" ")) return false;
    to.consumer = reader.name;
    to.stored = reader;
    reader.readFor(this.recipient(to));
    // Its copies count for overlapping subscriptions, as the replaced one's did (overlaps.ts).
    this.deliveries.consumerReading(to.sub);
    return true;
  }

  /** Where a subscription's stored messages go, and who hears of its consumer. */
  private recipient(entry: SessionEntry): Recipient {
    return new EntryRecipient(this.link, this.host, this.deliveries, entry);
  }

  /**
   * The connection ends: a subscription with nothing unacknowledged is parked (if the
   * session may live on and the gateway parks), any other stops.
   */
  stopReading(entry: SessionEntry, mayLiveOn: boolean): void {
    const { stored } = entry;
    if (!stored) return;
    const parked = this.deps.parked;
    const { account, clientId } = this.link;
    const filter = entry.sub.filter;
    if (mayLiveOn && parked && stored.park(() => parked.forget(account, clientId, filter, stored))) {
      if (!this.parking) {
        this.parking = new Map();
        parked.parkingBegins(account, clientId, this.parking);
      }
      this.parking.set(filter, stored);
    } else stored.stop();
  }

  /** The detached record is written (`record` at `revision`): what was parked waits here for a resume. */
  handOver(written: { readonly record: StoredSession; readonly revision: number } | undefined): void {
    const parking = this.parking;
    this.parking = undefined;
    if (!parking || !this.deps.parked) return;
    const session: ParkedSession | undefined = written && {
      epoch: this.host.epoch(),
      revision: written.revision,
      record: written.record,
      byFilter: parking,
    };
    this.deps.parked.park(this.link.account, this.link.clientId, session, parking);
  }

  /** Waiting for their store (/clients). */
  waitingCount(): number {
    let n = 0;
    for (const e of this.host.entries.values()) if (e.stored?.waiting) n++;
    return n;
  }
}

const prefixOf = (source: StoredSource) => (source.kind === "store" ? MSGS_PREFIX : "");

/** Where one subscription's stored messages go: the session's deliveries; its consumer's name: the session's record. */
class EntryRecipient implements Recipient {
  readonly budget: PullBudget;
  private readonly prefix: string;
  private logger: Logger | undefined;

  constructor(
    private readonly link: ClientLink,
    private readonly host: StoredSubscriptionsHost,
    private readonly deliveries: Deliveries,
    private readonly entry: SessionEntry,
  ) {
    this.budget = link.bytes;
    this.prefix = entry.source ? prefixOf(entry.source) : "";
  }

  onMessage(m: Msg, seq: number, d: StoredDelivery): void {
    this.deliveries.deliverStored(this.entry.sub, this.prefix, m, seq, d);
  }

  renamed(): string {
    const { link, entry, host } = this;
    return sessionConsumerName(link.account, link.clientId, entry.sub.filter, host.epoch());
  }

  onConsumer(name: string): void {
    const { entry, host } = this;
    if (host.entries.get(entry.sub.filter) !== entry) return;
    entry.consumer = name;
    host.consumerChanged();
  }

  /** Made when a line is written (a failure): a storm's resumes write none. */
  get log(): Logger {
    this.logger ??= this.link.log.child({ filter: this.entry.sub.filter });
    return this.logger;
  }
}
