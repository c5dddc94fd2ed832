import type { ISubscribePacket, IUnsubscribePacket, Packet } from "mqtt-packet";
import { Reason, SubackFailureV4 } from "../../protocol/mqttReasons.js";
import { newUniqueId } from "../publishId.js";
import { removeRecordedConsumers, removeSessionConsumer } from "./consumerRemoval.js";
import { Deliveries } from "./deliveries.js";
import type { SessionDeps } from "./deps.js";
import { InboundState } from "./inboundState.js";
import type { ClientLink } from "./link.js";
import type { OutboundFlow } from "./outbound.js";
import { tooManyLevels } from "./publishMapping.js";
import { RESUME_WAIT_MS, within } from "./resumeWait.js";
import { recordedConsumer, sessionConsumerName } from "./sessionConsumers.js";
import { type LoadedSession, type OutboundRecord, type StoredSession, storedSubscription } from "./sessionStore.js";
import { SessionWriter } from "./sessionWriter.js";
import { PARK_MS } from "./storedDeliveryOptions.js";
import { consumerDelivers, storedSourceOf } from "./storedSource.js";
import { type SessionEntry, StoredSubscriptions } from "./storedSubscriptions.js";
import { type ActiveSubscription, dropSubject, grantedAll, planSubscription } from "./subscriptions.js";

/**
 * The MQTT session of one connected client: its subscriptions (core NATS, plus for a
 * persistent session a durable consumer per QoS 1/2 subscription on stored subjects),
 * deliveries to the client, the state of the client's own QoS 1/2 publishes, and the
 * record in the sessions bucket that another connection, here or on another gateway,
 * resumes. The mqttSession machine decides when each of these happens.
 */
export class ClientSession {
  readonly entries = new Map<string, SessionEntry>();

  /** Its subscriptions (filters) now, for the metrics. */
  subscriptionCount(): number {
    return this.entries.size;
  }
  /** What reaches the client (deliveries.ts); the connection's acks complete its QoS 1/2 flow. */
  private readonly deliveries: Deliveries;
  /** The client's own QoS 1/2 publishes (inboundState.ts); saved with the record. */
  readonly inbound: InboundState;
  private readonly writer: SessionWriter;
  private readonly stored: StoredSubscriptions;
  /** Names this session's consumers; drawn when it starts fresh, kept when resumed. */
  private epoch: string | undefined;
  /** What the connection had in flight when it ended (stopDelivery), for the detached record. */
  private leftInFlight: OutboundRecord | undefined;
  /** The stored session's epoch when this connection resumed one: it reads the store. */
  private resumedEpoch: string | undefined;
  /**
   * The record follows the session while connected (SUBSCRIBE, QoS 2 state) only when
   * another connection may resume it: a session resumed with expiry 0 is removed at its end.
   */
  private readonly kept: boolean;
  /** The record written as this connection's (takeRecord, before CONNACK): later writes follow it. */
  private recordTaken: Promise<boolean> | undefined;
  /** Its subscriptions read the store: kept, or resumed (owed its queue even at expiry 0, MQTT 5 3.1.2.11.2). */
  private get persistent(): boolean {
    return this.kept || this.resumedEpoch !== undefined;
  }

  constructor(
    private readonly link: ClientLink,
    private readonly deps: SessionDeps,
    receiveMaximum: number,
    private readonly expirySec: number,
    /** Another connection of the client id wrote the session: this one lost it. */
    onMovedOn: () => void,
  ) {
    this.kept = expirySec > 0;
    this.deliveries = new Deliveries(link, deps.retained, receiveMaximum);
    this.writer = new SessionWriter(deps.store, link.account, link.clientId, onMovedOn);
    this.inbound = new InboundState(() => (this.kept ? this.saveConnected() : Promise.resolve(true)), this.kept);
    this.stored = new StoredSubscriptions(link, deps, this.deliveries, expirySec, {
      entries: this.entries,
      epoch: () => this.epoch,
      // The record names the consumer read; before CONNACK, takeRecord writes it.
      consumerChanged: () => {
        if (this.kept && this.recordTaken) this.link.tasks.run(() => this.saveConnected());
      },
    });
  }

  /** A session with nothing to resume: its consumers get names of their own. */
  startFresh(): void {
    this.epoch = newUniqueId();
    this.deps.parked?.drop(this.link.account, this.link.clientId);
  }

  /** QoS 1/2 deliveries in flight to the client (its PUBACK, PUBREC, PUBCOMP complete them). */
  get outbound(): OutboundFlow {
    return this.deliveries.outbound;
  }

  /** CONNACK is out: deliveries start (deliveries.ts). */
  release(): void {
    this.deliveries.release();
  }

  /**
   * Reopens the subscriptions of a stored session before CONNACK, so nothing published
   * after it is missed; each stored subscription's consumer hands back from its ack floor.
   */
  async resume(loaded: LoadedSession): Promise<void> {
    const { session: stored, revision } = loaded;
    // Parked here by the connection that wrote this very record: read on, no takeover.
    const parked = this.deps.parked?.take(this.link.account, this.link.clientId);
    const adoptable = parked?.revision === revision && parked.epoch === stored.epoch ? parked.byFilter : undefined;
    // Parked for another record (another connection wrote since): the takeover below fences them anyway.
    if (parked && !adoptable) for (const left of parked.byFilter.values()) left.stop();
    this.resumedEpoch = stored.epoch;
    this.epoch = stored.epoch;
    this.writer.revision = revision;
    this.inbound.restore(stored.inbound);
    this.deliveries.restore(stored.outbound);
    const acked = new Map((stored.outbound?.acked ?? []).map((a) => [a.filter, a]));
    const opened: SessionEntry[] = [];
    // Their recorded consumer reads the stream they read now: taken over from its floor.
    const resumed = new Set<SessionEntry>();
    for (const s of stored.subscriptions) {
      const plan = planSubscription(s.subscription, s.subscriptionId, this.link.settings);
      if (!plan.ok) continue;
      const recorded = s.stream
        ? {
            stream: s.stream,
            consumer: recordedConsumer(s, this.link.account, this.link.clientId, stored.epoch),
          }
        : undefined;
      const entry = this.open(plan.value, false, recorded);
      if (recorded && entry.consumer === recorded.consumer) resumed.add(entry);
      opened.push(entry);
    }
    // NATS judges them again (permissions may have changed since they were saved) before
    // any stored delivery, which reads with the gateway's own user, starts. A subject whose
    // SUB this connection already holds granted (lingering for this session, or another
    // client's) was judged: a resume that made no SUB asks no round trip.
    if (opened.some((e) => !grantedAll(e.sub))) await this.link.lease.nats.confirm().catch(() => {});
    const first: Promise<unknown>[] = [];
    for (const e of opened) {
      const [main, ...parents] = e.sub.subjects;
      for (const p of parents) if (this.link.denied.subscribe.delete(p)) dropSubject(e.sub, p);
      if (main !== undefined && this.link.denied.subscribe.delete(main)) this.close(e.sub.filter, true);
      else if (resumed.has(e) && this.stored.adopt(e, adoptable)) continue;
      else {
        // Waited for, within RESUME_WAIT_MS; a waiting one reads from the floor later.
        const started = this.stored
          .start(e, resumed.has(e) ? (acked.get(e.sub.filter) ?? { floor: 0, above: [] }) : undefined, true)
          .then((refused) => {
            if (refused === undefined || this.entries.get(e.sub.filter) !== e) return;
            // No SUBACK to tell on resume: it goes on live, QoS 1/2 copies included.
            this.close(e.sub.filter, false);
            this.open(e.sub, true);
          });
        first.push(started);
      }
    }
    for (const left of adoptable?.values() ?? []) left.stop();
    await within(Promise.all(first), RESUME_WAIT_MS);
  }

  /** A clean start or an expired session: what the stored one left goes, consumers first. */
  async discard(loaded: LoadedSession): Promise<void> {
    const { account, clientId } = this.link;
    this.deps.parked?.drop(account, clientId);
    await removeRecordedConsumers(this.deps.services, account, clientId, loaded.session);
    await this.deps.store.remove(account, clientId);
  }

  async subscribe(p: ISubscribePacket): Promise<void> {
    const { link } = this;
    const subId = p.properties?.subscriptionIdentifier as number | undefined;
    const granted: number[] = [];
    const fresh: Array<{ entry: SessionEntry; isNew: boolean; index: number }> = [];
    for (const [index, s] of p.subscriptions.entries()) {
      const plan = tooManyLevels(s.topic, link.settings.maxTopicLevels)
        ? ({ ok: false, error: { reasonCode: Reason.topicFilterInvalid, reason: "too many levels" } } as const)
        : planSubscription(s, subId, link.settings);
      if (!plan.ok) {
        link.metrics.refused("mqtt", plan.error.reasonCode === Reason.notAuthorized ? "not_authorized" : "bad_filter");
        granted.push(link.version === 5 ? plan.error.reasonCode : SubackFailureV4);
        continue;
      }
      const isNew = !this.entries.has(s.topic);
      if (isNew && this.entries.size >= link.settings.maxSubscriptionsPerClient) {
        granted.push(link.version === 5 ? Reason.quotaExceeded : SubackFailureV4);
        continue;
      }
      const replaced = this.entries.get(s.topic);
      const reader = replaced?.stored;
      if (replaced) replaced.stored = undefined;
      if (!isNew) this.close(s.topic, false);
      // Stored delivery starts only once NATS granted the subscription (below).
      const entry = this.open(plan.value);
      // The same filter again reads on with its reader [MQTT-3.8.4-3]: a new consumer would
      // start at "new", past what the session's held (a resume's backlog); one it cannot keep
      // goes, else it stays until the sweep (sessionFleet.test.ts, a SUBSCRIBE asked again).
      if (replaced && !this.stored.carryOver(replaced, reader, entry)) {
        reader?.stop();
        if (replaced.source && replaced.consumer && replaced.consumer !== entry.consumer)
          void removeSessionConsumer(this.deps.services, link.account, replaced.source.stream, replaced.consumer);
      }
      fresh.push({ entry, isNew, index });
      granted.push(plan.value.options.qos);
    }
    // NATS answers a subscription it refuses with -ERR before the flush's PONG.
    await link.lease.nats.confirm().catch(() => {});
    for (const f of fresh) {
      const [main, ...parents] = f.entry.sub.subjects;
      // `a/#` is `a.>` plus `a`: a user allowed `a.>` but not `a` keeps the subscription
      // without the parent level (docs/decisions/mqtt-sessions.md).
      for (const p of parents) if (link.denied.subscribe.delete(p)) dropSubject(f.entry.sub, p);
      if (main !== undefined && link.denied.subscribe.delete(main)) {
        this.close(f.entry.sub.filter, true);
        granted[f.index] = link.version === 5 ? Reason.notAuthorized : SubackFailureV4;
        link.metrics.refused("mqtt", "not_authorized");
      }
    }
    const unstored: string[] = [];
    for (const f of fresh) {
      if (granted[f.index] !== f.entry.sub.options.qos) continue;
      if (f.entry.stored) continue;
      const failed = await this.stored.start(f.entry, undefined, false);
      if (failed === undefined) continue;
      // QoS 1/2 on a stored subject is the stream's to deliver: without it, not granted (SUBACK says why).
      // Its consumer goes too: a create that timed out here may yet be carried out by the server.
      this.close(f.entry.sub.filter, true);
      granted[f.index] =
        link.version === 5
          ? failed.permission
            ? Reason.notAuthorized
            : failed.limit
              ? Reason.quotaExceeded
              : Reason.unspecified
          : SubackFailureV4;
      unstored.push(`${f.entry.sub.filter}: ${failed.reason}`);
      link.metrics.refused("mqtt", "stored_delivery_unavailable");
    }
    const reasonString =
      link.version === 5 && unstored.length > 0 ? `stored delivery unavailable for ${unstored.join("; ")}` : undefined;
    link.write({
      cmd: "suback",
      messageId: p.messageId,
      granted,
      ...(reasonString ? { properties: { reasonString } } : {}),
    } as Packet);
    // [MQTT-3.3.1-9..11] retain handling 0: always, 1: only for a new subscription, 2: never.
    const retainedFor = fresh
      .filter((f) => granted[f.index] === f.entry.sub.options.qos)
      .filter((f) => f.entry.sub.retainHandling === 0 || (f.entry.sub.retainHandling === 1 && f.isNew))
      .map((f) => f.entry.sub);
    if (retainedFor.length > 0) this.link.tasks.run(() => this.deliveries.sendRetained(retainedFor));
    if (this.kept) await this.saveConnected();
  }

  async unsubscribe(p: IUnsubscribePacket): Promise<void> {
    const codes = p.unsubscriptions.map((filter) =>
      this.close(filter, true) ? Reason.success : Reason.noSubscriptionExisted,
    );
    this.link.write({
      cmd: "unsuback",
      messageId: p.messageId,
      ...(this.link.version === 5 ? { granted: codes } : {}),
    } as Packet);
    if (this.kept) await this.saveConnected();
  }

  /**
   * NATS refused, outside a SUBSCRIBE, a subject this session subscribes to: it removed a
   * subscription it had granted (permissions shrank on a reload). Stored delivery reads
   * with the gateway's user, so it stops here as NATS stopped the core one, and what NATS
   * said may be read before is asked again.
   */
  subscriptionRefused(subject: string): void {
    const affected = [...this.entries.values()].filter((e) => e.sub.subjects.includes(subject));
    for (const e of affected) {
      if (e.sub.subjects.indexOf(subject) === 0) this.close(e.sub.filter, true);
      else dropSubject(e.sub, subject);
    }
    if (affected.length === 0) return;
    this.deliveries.forgetPermissions();
    if (this.kept) this.link.tasks.run(() => this.saveConnected());
  }

  /** The connection ends: stop reading, and remember what the client had in flight. */
  stopDelivery(): void {
    const acked: Array<{ filter: string; floor: number; above: number[] }> = [];
    // A session that lives on leaves its SUBs for a resume here as long as its readers park:
    // no UNSUB now and no SUB then (docs/decisions/shared-core-subscriptions.md).
    const lingerMs = this.kept ? Math.min(PARK_MS, this.expirySec * 1000) : 0;
    for (const e of this.entries.values()) {
      this.deliveries.unlisten(e.sub, lingerMs);
      if (e.sub.options.noLocal) this.link.noLocal.count--;
      if (e.stored) acked.push({ filter: e.sub.filter, ...e.stored.acknowledged() });
      this.stored.stopReading(e, this.kept);
    }
    this.leftInFlight = { ...this.outbound.snapshot(), ...(acked.length ? { acked } : {}) };
  }

  /**
   * Marks the session held by this connection before CONNACK, whatever was written since it
   * was read: this connection is the session's owner now, and the writes of an earlier one
   * that finishes late find a newer revision and give up (sessionWriter.ts). `held`: what a
   * resume of the record parked here wrote at load (parkedHold.ts), which marked it already.
   */
  takeRecord(held?: StoredSession): Promise<void> {
    if (held) {
      // Written again only if the resume changed its subscriptions (a filter refused on
      // resume), on the revision that write left.
      const now = this.record(true, this.expirySec);
      this.recordTaken =
        JSON.stringify(now.subscriptions) === JSON.stringify(held.subscriptions)
          ? Promise.resolve(true)
          : this.saveConnected();
    } else {
      this.writer.revision = undefined;
      this.recordTaken = this.saveConnected();
    }
    return this.recordTaken.then(() => {});
  }

  /** The record while connected (CONNACK, SUBSCRIBE, QoS 2 state); false: not written (failed, moved on). */
  saveConnected(): Promise<boolean> {
    return this.writer
      .write(() => ({ session: this.record(true, this.expirySec) }))
      .catch((e: Error) => {
        this.link.metrics.jetstreamError("mqtt", "kv");
        this.link.log.warn({ err: e.message }, "could not save the MQTT session");
        return false;
      });
  }

  /** The connection ended and the session outlives it for `expirySec`; the store drops it then. */
  saveDetached(expirySec: number): Promise<boolean> {
    let record: StoredSession | undefined;
    const saved = this.writer.write(() => {
      record = this.record(false, expirySec);
      return { session: record, ttlSec: expirySec };
    });
    // Parked subscriptions wait for a resume of the record just written; else they stop.
    saved.then(
      (ok) => {
        const revision = this.writer.revision;
        this.stored.handOver(ok && record && revision !== undefined ? { record, revision } : undefined);
      },
      () => this.stored.handOver(undefined),
    );
    return saved;
  }

  /** The session's machine ended (saved, removed, refused, stopped waiting): nothing more is written. */
  stopWriting(): void {
    this.writer.close();
  }

  /** The session ends with its connection: its record, then its consumers, unless a newer connection took it. */
  async removeStored(): Promise<void> {
    this.stored.handOver(undefined);
    if (!(await this.writer.remove())) return;
    const { account } = this.link;
    await Promise.all(
      [...this.entries.values()]
        .filter((e) => e.source && e.consumer)
        .map((e) => removeSessionConsumer(this.deps.services, account, e.source!.stream, e.consumer!)),
    );
  }

  private record(connected: boolean, expirySec: number): StoredSession {
    // In the order they were made: a resume reopens them so, and overlaps.ts goes by it.
    const subscriptions = [...this.entries.values()].map((e) =>
      storedSubscription(e.sub, e.source?.stream, e.consumer),
    );
    const inbound = this.inbound.toRecord();
    return {
      epoch: this.epoch,
      subscriptions,
      expiresAt: Date.now() + expirySec * 1000,
      expirySec,
      owner: this.deps.gatewayId,
      connected,
      ...(inbound ? { inbound } : {}),
      ...(!connected && this.leftInFlight ? { outbound: this.leftInFlight } : {}),
    };
  }

  /** `recorded`: a resumed subscription, with the stream and consumer its record names. */
  private open(
    plan: Omit<ActiveSubscription, "nats">,
    liveOnly = false,
    recorded?: { stream: string; consumer: string },
  ): SessionEntry {
    const { link } = this;
    const source =
      liveOnly || !this.persistent
        ? undefined
        : storedSourceOf(plan, this.link.account, this.deps.bindings, this.deps.messages);
    const stream = source?.stream;
    if (plan.options.noLocal) link.noLocal.count++;
    const sub = this.deliveries.listen(
      plan,
      source ? (m, subject) => consumerDelivers(source, m, link.account, this.deps.bindings, subject) : undefined,
    );
    // The consumer to take over (the record's, when it reads the same stream), else a new one.
    const consumer = !stream
      ? undefined
      : recorded?.stream === stream
        ? recorded.consumer
        : sessionConsumerName(link.account, link.clientId, plan.filter, this.epoch);
    const entry: SessionEntry = { sub, source, consumer };
    this.entries.set(plan.filter, entry);
    return entry;
  }

  /** Waiting for their store (/clients). */
  storedWaitingCount(): number {
    return this.stored.waitingCount();
  }

  private close(filter: string, removeConsumer: boolean): boolean {
    const e = this.entries.get(filter);
    if (!e) return false;
    this.deliveries.unlisten(e.sub);
    if (e.sub.options.noLocal) this.link.noLocal.count--;
    e.stored?.stop();
    this.entries.delete(filter);
    if (removeConsumer && e.source && e.consumer)
      void removeSessionConsumer(this.deps.services, this.link.account, e.source.stream, e.consumer);
    return true;
  }
}
