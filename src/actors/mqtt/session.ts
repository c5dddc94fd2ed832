import { randomBytes } from "node:crypto";
import type { Msg } from "@nats-io/transport-node";
import type { ISubscribePacket, IUnsubscribePacket, Packet } from "mqtt-packet";
import { storedDeliverable } from "../../protocol/deliveryGuard.js";
import { Reason, SubackFailureV4 } from "../../protocol/mqttReasons.js";
import { natsToMqttPublish } from "../../protocol/natsToMqtt.js";
import type { AccountServices } from "../accountServices.js";
import type { Bindings } from "../bindings.js";
import { type MessageStore, MSGS_PREFIX } from "../messageStore.js";
import { flushAndSettle } from "../natsBridge.js";
import { tooManyLevels } from "./inbound.js";
import { InboundState } from "./inboundState.js";
import type { ClientLink } from "./link.js";
import { carriesQos12, headerPairsOf, storedCopy } from "./natsHeaders.js";
import { OutboundFlow } from "./outbound.js";
import { ReadPermission } from "./readPermission.js";
import type { RetainedMessages } from "./retained.js";
import type { LoadedSession, OutboundRecord, SessionStore, StoredSession, StoredSubscription } from "./sessionStore.js";
import { SessionWriter } from "./sessionWriter.js";
import { StoredDelivery } from "./storedDelivery.js";
import { type ActiveSubscription, closeSubscription, openSubscription, planSubscription } from "./subscriptions.js";

interface Entry {
  readonly sub: ActiveSubscription;
  /** Where its QoS 1/2 messages are read from, and the consumer that reads them; undefined: live only. */
  readonly source: StoredSource | undefined;
  consumer: string | undefined;
  stored?: StoredDelivery;
}

/**
 * A QoS 1/2 subscription's stored messages (docs/decisions/mqtt-store.md): the stream a
 * binding names when one covers all its subjects, else the MQTT store. `partial`: some of
 * its subjects are bound, and the store holds none of theirs, so those come live.
 */
type StoredSource =
  | { readonly kind: "bound"; readonly stream: string }
  | { readonly kind: "store"; readonly stream: string; readonly partial: boolean };

export interface SessionDeps {
  readonly services: AccountServices;
  readonly bindings: Bindings;
  /** The MQTT store: QoS 1/2 messages on unbound subjects, for persistent sessions. */
  readonly messages: MessageStore;
  readonly retained: RetainedMessages;
  readonly store: SessionStore;
  readonly gatewayId: string;
}

/**
 * The MQTT session of one connected client: its subscriptions (core NATS, plus for a
 * persistent session a durable consumer per QoS 1/2 subscription on stored subjects),
 * deliveries to the client, the state of the client's own QoS 1/2 publishes, and the
 * record in the sessions bucket that another connection, here or on another gateway,
 * resumes. The mqttSession machine decides when each of these happens.
 */
export class ClientSession {
  private readonly entries = new Map<string, Entry>();

  /** Its subscriptions (filters) now, for the metrics. */
  subscriptionCount(): number {
    return this.entries.size;
  }
  readonly outbound: OutboundFlow;
  /** The client's own QoS 1/2 publishes (inboundState.ts); saved with the record. */
  readonly inbound: InboundState;
  /** Deliveries that arrive before CONNACK is out wait here; undefined once the client is served. */
  private held: Array<() => void> | undefined = [];
  /** PUBRELs owed since the last connection, sent once CONNACK is out [MQTT-4.4.0-1]. */
  private pubrel: number[] = [];
  private permission: ReadPermission | undefined;
  private readonly writer: SessionWriter;
  /** Names this session's consumers; drawn when it starts fresh, kept when resumed. */
  private epoch: string | undefined;
  /** What the connection had in flight when it ended (stopDelivery), for the detached record. */
  private leftInFlight: OutboundRecord | undefined;
  /** The store holds this session while it lives (expiry > 0 at CONNECT). */
  private readonly persistent: boolean;

  constructor(
    private readonly link: ClientLink,
    private readonly deps: SessionDeps,
    receiveMaximum: number,
    private readonly expirySec: number,
    /** Another connection of the client id wrote the session: this one lost it. */
    onMovedOn: () => void,
  ) {
    this.persistent = expirySec > 0;
    // A stored message dropped from the backlog is not acknowledged: the stream sends it again after ack_wait.
    this.outbound = new OutboundFlow(
      receiveMaximum,
      1000,
      (p) => link.write(p as Packet),
      () => link.metrics.dropped("mqtt", "backlog_full"),
    );
    this.writer = new SessionWriter(deps.store, link.account, link.clientId, onMovedOn);
    this.inbound = new InboundState(() => (this.persistent ? this.saveConnected() : Promise.resolve()));
  }

  /** A session with nothing to resume: its consumers get names of their own. */
  startFresh(): void {
    this.epoch = randomBytes(8).toString("hex");
  }

  /** CONNACK is out: the PUBRELs owed first, then what waited for it, then everything from now on. */
  release(): void {
    for (const messageId of this.pubrel.splice(0)) this.link.write({ cmd: "pubrel", messageId } as Packet);
    const held = this.held ?? [];
    this.held = undefined;
    for (const deliver of held) deliver();
  }

  /**
   * Reopens the subscriptions of a stored session before CONNACK, so nothing published
   * after it is missed; each stored subscription's consumer hands back from its ack floor.
   */
  async resume(loaded: LoadedSession): Promise<void> {
    const { session: stored, revision } = loaded;
    this.epoch = stored.epoch;
    this.writer.revision = revision;
    this.inbound.restore(stored.inbound);
    this.pubrel = this.outbound.restore(stored.outbound);
    const acked = new Map((stored.outbound?.acked ?? []).map((a) => [a.filter, a]));
    const opened: Entry[] = [];
    /** Subscriptions whose recorded consumer reads the stream they read now: taken over from its floor. */
    const resumed = new Set<Entry>();
    for (const s of stored.subscriptions) {
      const plan = planSubscription(s.subscription, s.subscriptionId, this.link.settings.maxSubjectBytes);
      if (!plan.ok) continue;
      const recorded = s.stream ? { stream: s.stream, consumer: consumerOf(s, this.link.account, this.link.clientId, stored.epoch) } : undefined;
      const entry = this.open(plan.value, false, recorded);
      if (recorded && entry.consumer === recorded.consumer) resumed.add(entry);
      opened.push(entry);
    }
    // NATS judges them again (permissions may have changed since they were saved) before
    // any stored delivery, which reads with the gateway's own user, starts.
    await flushAndSettle(this.link.lease.nc).catch(() => {});
    for (const e of opened) {
      const [main, ...parents] = e.sub.subjects;
      for (const p of parents) if (this.link.denied.subscribe.delete(p)) dropSubject(e.sub, p);
      if (main !== undefined && this.link.denied.subscribe.delete(main)) this.close(e.sub.filter, true);
      else if ((await this.startStored(e, resumed.has(e) ? (acked.get(e.sub.filter) ?? { floor: 0, above: [] }) : undefined)) !== undefined) {
        // Nobody to tell now (no SUBACK on resume): the subscription goes on live, QoS 1/2 copies included.
        this.close(e.sub.filter, false);
        this.open(e.sub, true);
      }
    }
  }

  /** A clean start or an expired session: what the stored one left goes, consumers first. */
  async discard(loaded: LoadedSession): Promise<void> {
    const { account, clientId } = this.link;
    await Promise.all(
      loaded.session.subscriptions
        .filter((s) => s.stream)
        .map((s) => StoredDelivery.remove(this.deps.services, account, s.stream!, consumerOf(s, account, clientId, loaded.session.epoch))),
    );
    await this.deps.store.remove(account, clientId);
  }

  async subscribe(p: ISubscribePacket): Promise<void> {
    const { link } = this;
    const subId = p.properties?.subscriptionIdentifier as number | undefined;
    const granted: number[] = [];
    const fresh: Array<{ entry: Entry; isNew: boolean; index: number }> = [];
    for (const [index, s] of p.subscriptions.entries()) {
      const plan = tooManyLevels(s.topic, link.settings.maxTopicLevels)
        ? ({ ok: false, error: { reasonCode: Reason.topicFilterInvalid, reason: "too many levels" } } as const)
        : planSubscription(s, subId, link.settings.maxSubjectBytes);
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
      if (!isNew) this.close(s.topic, false);
      // Stored delivery starts only once NATS granted the subscription (below).
      fresh.push({ entry: this.open(plan.value), isNew, index });
      granted.push(s.qos);
    }
    // NATS answers a subscription it refuses with -ERR before the flush's PONG.
    await flushAndSettle(link.lease.nc).catch(() => {});
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
      if (granted[f.index] !== p.subscriptions[f.index]?.qos) continue;
      const failed = await this.startStored(f.entry, undefined);
      if (failed === undefined) continue;
      // QoS 1/2 on a stored subject is the stream's to deliver: without it, not granted (the SUBACK says why).
      this.close(f.entry.sub.filter, false);
      granted[f.index] = link.version === 5 ? (failed.permission ? Reason.notAuthorized : Reason.unspecified) : SubackFailureV4;
      unstored.push(`${f.entry.sub.filter}: ${failed.reason}`);
      link.metrics.refused("mqtt", "stored_delivery_unavailable");
    }
    const reasonString = link.version === 5 && unstored.length > 0 ? `stored delivery unavailable for ${unstored.join("; ")}` : undefined;
    link.write({ cmd: "suback", messageId: p.messageId, granted, ...(reasonString ? { properties: { reasonString } } : {}) } as Packet);
    for (const f of fresh) {
      if (granted[f.index] !== p.subscriptions[f.index]?.qos) continue;
      const rh = f.entry.sub.retainHandling;
      // [MQTT-3.3.1-9..11] retain handling 0: always, 1: only for a new subscription, 2: never.
      if (rh === 0 || (rh === 1 && f.isNew)) void this.sendRetained(f.entry.sub);
    }
    if (this.persistent) await this.saveConnected();
  }

  async unsubscribe(p: IUnsubscribePacket): Promise<void> {
    const codes = p.unsubscriptions.map((filter) => (this.close(filter, true) ? Reason.success : Reason.noSubscriptionExisted));
    this.link.write({ cmd: "unsuback", messageId: p.messageId, ...(this.link.version === 5 ? { granted: codes } : {}) } as Packet);
    if (this.persistent) await this.saveConnected();
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
    this.permission = undefined;
    if (this.persistent) void this.saveConnected();
  }

  /** The connection ends: stop reading, and remember what the client had in flight. */
  stopDelivery(): void {
    const acked: Array<{ filter: string; floor: number; above: number[] }> = [];
    for (const e of this.entries.values()) {
      closeSubscription(e.sub);
      if (e.sub.options.noLocal) this.link.noLocal.count--;
      if (e.stored) acked.push({ filter: e.sub.filter, ...e.stored.acknowledged() });
      e.stored?.stop();
    }
    this.leftInFlight = { ...this.outbound.snapshot(), ...(acked.length ? { acked } : {}) };
  }

  /**
   * Marks the session held by this connection before CONNACK, whatever was written since it
   * was read: this connection is the session's owner now, and the writes of an earlier one
   * that finishes late find a newer revision and give up (sessionWriter.ts).
   */
  takeRecord(): Promise<void> {
    this.writer.revision = undefined;
    return this.saveConnected();
  }

  /** The session's record while the client is connected (at CONNACK, on SUBSCRIBE, for QoS 2 state). */
  saveConnected(): Promise<void> {
    return this.writer.write(() => ({ session: this.record(true, this.expirySec) })).catch((e: Error) => {
      this.link.metrics.jetstreamError("mqtt", "kv");
      this.link.log.warn({ err: e.message }, "could not save the MQTT session");
    });
  }

  /** The connection ended and the session outlives it for `expirySec`; the store drops it then. */
  saveDetached(expirySec: number): Promise<void> {
    return this.writer.write(() => ({ session: this.record(false, expirySec), ttlSec: expirySec }));
  }

  /** The session's machine ended (saved, removed, refused, or it stopped waiting): nothing more is written. */
  stopWriting(): void {
    this.writer.close();
  }

  /** The session ends with its connection: its record, then its consumers, unless a newer connection took it. */
  async removeStored(): Promise<void> {
    if (!(await this.writer.remove())) return;
    const { account } = this.link;
    await Promise.all(
      [...this.entries.values()]
        .filter((e) => e.source && e.consumer)
        .map((e) => StoredDelivery.remove(this.deps.services, account, e.source!.stream, e.consumer!)),
    );
  }

  private record(connected: boolean, expirySec: number): StoredSession {
    const subscriptions: StoredSubscription[] = [...this.entries.values()].map((e) => ({
      subscription: {
        topic: e.sub.filter,
        qos: e.sub.options.qos,
        nl: e.sub.options.noLocal,
        rap: e.sub.options.retainAsPublished,
        rh: e.sub.retainHandling,
      },
      subscriptionId: e.sub.options.subscriptionId,
      stream: e.source?.stream,
      consumer: e.consumer,
    }));
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
  private open(plan: Omit<ActiveSubscription, "nats">, liveOnly = false, recorded?: { stream: string; consumer: string }): Entry {
    const { link } = this;
    const source = liveOnly ? undefined : this.storedSourceOf(plan);
    const stream = source?.stream;
    if (plan.options.noLocal) link.noLocal.count++;
    const sub = openSubscription(
      link.lease.nc,
      plan,
      (s, subject, headers, data, reply) => this.deliver(s, subject, headers, data, reply),
      // The copies its consumer delivers, dropped before any header is read: most of what
      // such a subscription hears.
      source ? (m) => this.consumerDelivers(source, m) : undefined,
    );
    // The consumer to take over (the record's, when it reads the same stream), else a new one.
    const consumer = !stream
      ? undefined
      : recorded?.stream === stream
        ? recorded.consumer
        : StoredDelivery.consumerName(link.account, link.clientId, plan.filter, this.epoch);
    const entry: Entry = { sub, source, consumer };
    this.entries.set(plan.filter, entry);
    return entry;
  }

  /**
   * The durable consumer of a QoS 1/2 subscription on stored subjects. It reads with the
   * gateway's own user, so it starts only after NATS granted the client's subscription.
   * `resume`: the session was resumed, so the consumer hands back from its ack floor.
   * Resolves to why it could not start (and whether the gateway user lacks a permission), else undefined.
   */
  private async startStored(
    entry: Entry,
    resume: { floor: number; above: readonly number[] } | undefined,
  ): Promise<{ reason: string; permission: boolean } | undefined> {
    const { link } = this;
    const { sub, source, consumer } = entry;
    if (!source || !consumer || this.entries.get(sub.filter) !== entry) return undefined;
    const { stream } = source;
    const prefix = source.kind === "store" ? MSGS_PREFIX : "";
    try {
      // The MQTT store is made on first use, by a subscriber as well as a publisher.
      if (source.kind === "store" && (await this.deps.messages.ensure(link.account)) === undefined) throw new Error("no MQTT store in this account");
      const stored = await StoredDelivery.open({
        services: this.deps.services,
        account: link.account,
        stream,
        name: consumer,
        renamed: () => StoredDelivery.consumerName(link.account, link.clientId, sub.filter, this.epoch),
        subjects: sub.subjects.map((s) => prefix + s),
        maxAckPending: Math.min(link.settings.receiveMaximum, 65535),
        inactiveMs: this.expirySec * 1000,
        onMessage: (m, seq, d) => this.deliverStored(sub, prefix, m, seq, d),
        resume,
        log: link.log,
      });
      // Closed meanwhile (UNSUBSCRIBE, the same filter subscribed again, the connection ending).
      if (this.entries.get(sub.filter) === entry && sub.nats.length > 0) {
        entry.stored = stored;
        // A resume reads a consumer of its own: the record names it from now on.
        entry.consumer = stored.name;
      } else stored.stop();
      return undefined;
    } catch (e) {
      link.metrics.jetstreamError("mqtt", "consumer");
      const message = (e as Error).message;
      const missing = missingPermission(e);
      const reason = missing ? `the gateway user may not ${missing.operation} ${missing.subject}` : message;
      link.log.warn({ filter: sub.filter, stream, err: message, ...(missing ? { missing_permission: missing } : {}) }, `stored delivery unavailable: ${reason}`);
      return { reason, permission: missing !== undefined };
    }
  }

  private close(filter: string, removeConsumer: boolean): boolean {
    const e = this.entries.get(filter);
    if (!e) return false;
    closeSubscription(e.sub);
    if (e.sub.options.noLocal) this.link.noLocal.count--;
    e.stored?.stop();
    this.entries.delete(filter);
    if (removeConsumer && e.source && e.consumer) void StoredDelivery.remove(this.deps.services, this.link.account, e.source.stream, e.consumer);
    return true;
  }

  /**
   * Where a QoS 1/2 subscription of a persistent session reads its messages: the bound
   * stream when one binding covers every subject, else the MQTT store. A session that ends
   * with its connection has nothing to hand back on a later one, and a shared subscription
   * belongs to no session: both read core NATS only.
   */
  private storedSourceOf(plan: Omit<ActiveSubscription, "nats">): StoredSource | undefined {
    if (!this.persistent || plan.options.qos === 0 || plan.queue) return undefined;
    const coverage = plan.subjects.map((subject) => this.deps.bindings.coverage(this.link.account, subject));
    const streams = new Set(coverage.flatMap((c) => (c.kind === "stored" ? [c.stream.stream] : [])));
    const [stream] = streams;
    if (stream !== undefined && streams.size === 1 && coverage.every((c) => c.kind === "stored")) return { kind: "bound", stream };
    const touchesBound = coverage.some((c) => c.kind !== "unstored");
    if (!this.deps.messages.enabled()) return undefined;
    return { kind: "store", stream: this.deps.messages.streamName(), partial: touchesBound };
  }

  /**
   * The core copy of a message the subscription's consumer delivers: skipped live. A bound
   * stream keeps every Mqgw-QoS 1/2 message on its subjects; the MQTT store only what a
   * gateway client published (marked by its Nats-Msg-Id) to a subject no binding stores.
   */
  private consumerDelivers(source: StoredSource, m: Msg): boolean {
    if (source.kind === "bound") return carriesQos12(m);
    if (!storedCopy(m)) return false;
    return !source.partial || this.deps.bindings.storedIn(this.link.account, m.subject) === undefined;
  }

  private deliver(sub: ActiveSubscription, subject: string, headers: Iterable<[string, string]> | undefined, data: Uint8Array, reply: string | undefined, retained = false): void {
    if (this.held) {
      this.held.push(() => this.deliver(sub, subject, headers, data, reply, retained));
      return;
    }
    const { link } = this;
    const out = natsToMqttPublish(subject, headers, data, reply, sub.options, { protocolVersion: link.version, clientId: link.clientId, now: Date.now() }, retained);
    if (typeof out === "string") {
      if (out === "expired") link.metrics.dropped("mqtt", "expired");
      return;
    }
    if (out.lost) link.metrics.propertiesLost("mqtt", out.lost);
    if (out.qos === 0 && link.queuedBytes() > link.settings.maxQueuedBytes) {
      // A slow consumer loses QoS 0 messages, not the gateway's memory (docs/decisions/mqtt-sessions.md).
      link.metrics.dropped("mqtt", "slow_consumer");
      return;
    }
    // One larger than the client allows is dropped and counted by the connection's writer.
    if (this.outbound.send(out)) link.metrics.messageOut("mqtt", "delivered");
  }

  /** A message of the subscription's consumer; `prefix` is what its stream puts before the subject (the MQTT store's `$MQG.msgs.`). */
  private deliverStored(sub: ActiveSubscription, prefix: string, m: Msg, seq: number, d: StoredDelivery, checked = false): void {
    if (this.held) {
      this.held.push(() => this.deliverStored(sub, prefix, m, seq, d, checked));
      return;
    }
    const subject = prefix ? m.subject.slice(prefix.length) : m.subject;
    if (!checked && (!m.subject.startsWith(prefix) || !storedDeliverable(sub.subjects, subject))) {
      d.ack(seq); // not on this subscription's subjects: never the client's
      return;
    }
    const may = checked || this.mayRead(sub, subject);
    if (may !== true) {
      // Denied: consumed for this client, which may not read it. Unknown (NATS away): left for redelivery.
      void may.then((yes) => (yes === true ? this.deliverStored(sub, prefix, m, seq, d, true) : yes === false ? d.ack(seq) : undefined));
      return;
    }
    const headers = headerPairsOf(m);
    if (!isQos12(headers)) {
      d.ack(seq); // without Mqgw-QoS 1/2 it reaches the client from core NATS, live only
      return;
    }
    const out = natsToMqttPublish(subject, headers, m.data, undefined, sub.options, { protocolVersion: this.link.version, clientId: this.link.clientId, now: Date.now() });
    if (typeof out === "string") {
      d.ack(seq);
      return;
    }
    if (out.lost) this.link.metrics.propertiesLost("mqtt", out.lost);
    const origin = { filter: sub.filter, seq };
    // Too large for the client: dropped, and acknowledged as if delivered [MQTT-3.1.2-25].
    if (this.outbound.send(out, { onStored: () => d.ack(seq), origin, pid: this.outbound.handedBack(origin) }))
      this.link.metrics.messageOut("mqtt", "delivered_stored");
  }

  private async sendRetained(sub: ActiveSubscription): Promise<void> {
    const found = await this.deps.retained.matching(this.link.account, sub.subjects).catch(() => []);
    for (const r of found) {
      if (!storedDeliverable(sub.subjects, r.subject)) continue;
      const may = this.mayRead(sub, r.subject);
      if (may === true || (await may) === true) this.deliver(sub, r.subject, r.headers, r.data, undefined, true);
    }
  }

  private mayRead(sub: ActiveSubscription, subject: string): true | Promise<boolean | undefined> {
    this.permission ??= new ReadPermission(this.link.lease.nc, this.link.denied.subscribe);
    return this.permission.mayRead(sub.subjects, subject);
  }
}

/** A stored subscription's consumer: named in the record, or, in a record from before epochs, by filter alone. */
function consumerOf(s: StoredSubscription, account: string, clientId: string, epoch: string | undefined): string {
  return s.consumer ?? StoredDelivery.consumerName(account, clientId, s.subscription.topic, epoch);
}

/** The permission NATS refused, from a nats.js error (or its cause). */
function missingPermission(e: unknown): { operation: string; subject: string } | undefined {
  for (let x: unknown = e; x instanceof Error; x = (x as { cause?: unknown }).cause) {
    const m = /Permissions Violation for (Publish|Subscription) to "([^"]+)"/i.exec(x.message);
    if (m) return { operation: m[1]!.toLowerCase() === "publish" ? "publish to" : "subscribe to", subject: m[2]! };
  }
  return undefined;
}

function dropSubject(sub: ActiveSubscription, subject: string): void {
  for (const n of sub.nats) if (n.getSubject() === subject) n.unsubscribe();
  sub.nats = sub.nats.filter((n) => n.getSubject() !== subject);
  // Nor is it read for this subscription from the retained stream or a consumer.
  const at = sub.subjects.indexOf(subject);
  if (at >= 0) sub.subjects.splice(at, 1);
}

function isQos12(headers: Iterable<[string, string]> | undefined): boolean {
  if (!headers) return false;
  for (const [k, v] of headers) if (k.toLowerCase() === "mqgw-qos") return v === "1" || v === "2";
  return false;
}
