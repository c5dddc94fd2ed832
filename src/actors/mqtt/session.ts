import type { Msg } from "@nats-io/transport-node";
import type { ISubscribePacket, IUnsubscribePacket, Packet } from "mqtt-packet";
import { Reason, SubackFailureV4 } from "../../protocol/mqttReasons.js";
import { natsToMqttPublish } from "../../protocol/natsToMqtt.js";
import type { AccountServices } from "../accountServices.js";
import type { Bindings } from "../bindings.js";
import { type MessageStore, MSGS_PREFIX } from "../messageStore.js";
import { flushAndSettle } from "../natsBridge.js";
import { tooManyLevels } from "./inbound.js";
import type { ClientLink } from "./link.js";
import { carriesQos12, headerPairsOf, storedCopy } from "./natsHeaders.js";
import { OutboundFlow } from "./outbound.js";
import type { RetainedMessages } from "./retained.js";
import type { SessionStore, StoredSession } from "./sessionStore.js";
import { StoredDelivery } from "./storedDelivery.js";
import { type ActiveSubscription, closeSubscription, openSubscription, planSubscription } from "./subscriptions.js";

interface Entry {
  readonly sub: ActiveSubscription;
  /** Where its QoS 1/2 messages are read from; undefined: live only (also when reading it failed). */
  source: StoredSource | undefined;
  stored?: StoredDelivery;
}

/**
 * A QoS 1/2 subscription's stored messages (docs/decisions/mqtt-store.md): the stream a
 * binding names when one covers all its subjects (any session), else, for a persistent
 * session, the MQTT store. `partial`: some of its subjects are bound, and the store holds
 * none of theirs, so those come live from core NATS.
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
 * The MQTT session of one connected client: its subscriptions (core NATS, plus a durable
 * consumer for QoS 1/2 on stored subjects), deliveries to the client, and what is saved
 * in the sessions bucket so another connection, here or on another gateway, resumes it.
 */
export class ClientSession {
  private readonly entries = new Map<string, Entry>();
  readonly outbound: OutboundFlow;
  /** Deliveries that arrive before CONNACK is out wait here; undefined once the client is served. */
  private held: Array<() => void> | undefined = [];
  /** Subjects NATS was asked about with a probe subscription (see mayRead); bounded. */
  private readable: Map<string, Promise<boolean | undefined>> | undefined;

  constructor(
    private readonly link: ClientLink,
    private readonly deps: SessionDeps,
    receiveMaximum: number,
    private readonly clientMaxPacket: number,
    private readonly expirySec: number,
  ) {
    // A stored message dropped from the backlog is not acknowledged: the stream sends it again after ack_wait.
    this.outbound = new OutboundFlow(
      receiveMaximum,
      1000,
      (p) => link.write(p as Packet),
      () => link.metrics.dropped("mqtt", "backlog_full"),
    );
  }

  /** CONNACK is out: deliver what waited for it, and everything from now on. */
  release(): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const deliver of held) deliver();
  }

  /** Reopens the subscriptions of a stored session (before CONNACK, so nothing is missed after it). */
  async resume(stored: StoredSession, ownerGone = false): Promise<void> {
    const opened: Entry[] = [];
    for (const s of stored.subscriptions) {
      const plan = planSubscription(s.subscription, s.subscriptionId);
      if (plan.ok) opened.push(await this.open(plan.value, false));
    }
    // NATS judges them again (permissions may have changed since they were saved) before
    // any stored delivery, which reads with the gateway's own user, starts.
    await flushAndSettle(this.link.lease.nc).catch(() => {});
    for (const e of opened) {
      const [main, ...parents] = e.sub.subjects;
      for (const p of parents) if (this.link.denied.subscribe.delete(p)) dropSubject(e.sub, p);
      if (main !== undefined && this.link.denied.subscribe.delete(main)) this.close(e.sub.filter, true);
      else await this.startStored(e, ownerGone);
    }
  }

  async subscribe(p: ISubscribePacket): Promise<void> {
    const { link } = this;
    const subId = p.properties?.subscriptionIdentifier as number | undefined;
    const granted: number[] = [];
    const fresh: Array<{ entry: Entry; isNew: boolean; index: number }> = [];
    for (const [index, s] of p.subscriptions.entries()) {
      const plan = tooManyLevels(s.topic, link.settings.maxTopicLevels)
        ? ({ ok: false, error: { reasonCode: Reason.topicFilterInvalid, reason: "too many levels" } } as const)
        : planSubscription(s, subId);
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
      const entry = await this.open(plan.value, false);
      fresh.push({ entry, isNew, index });
      granted.push(s.qos);
    }
    // NATS answers a subscription it refuses with -ERR before the flush's PONG.
    await flushAndSettle(link.lease.nc).catch(() => {});
    for (const f of fresh) {
      const [main, ...parents] = f.entry.sub.subjects;
      // `a/#` is `a.>` plus `a`: a user allowed `a.>` but not `a` keeps the subscription
      // without the parent level (docs/decisions/mqtt-subscriptions.md).
      for (const p of parents) if (link.denied.subscribe.delete(p)) dropSubject(f.entry.sub, p);
      if (main !== undefined && link.denied.subscribe.delete(main)) {
        this.close(f.entry.sub.filter, true);
        granted[f.index] = link.version === 5 ? Reason.notAuthorized : SubackFailureV4;
        link.metrics.refused("mqtt", "not_authorized");
      }
    }
    for (const f of fresh) if (granted[f.index] === p.subscriptions[f.index]?.qos) await this.startStored(f.entry);
    link.write({ cmd: "suback", messageId: p.messageId, granted } as Packet);
    for (const f of fresh) {
      if (granted[f.index] !== p.subscriptions[f.index]?.qos) continue;
      const rh = f.entry.sub.retainHandling;
      // [MQTT-3.3.1-9..11] retain handling 0: always, 1: only for a new subscription, 2: never.
      if (rh === 0 || (rh === 1 && f.isNew)) void this.sendRetained(f.entry.sub);
    }
    await this.save();
  }

  async unsubscribe(p: IUnsubscribePacket): Promise<void> {
    const codes = p.unsubscriptions.map((filter) => (this.close(filter, true) ? Reason.success : Reason.noSubscriptionExisted));
    this.link.write({ cmd: "unsuback", messageId: p.messageId, ...(this.link.version === 5 ? { granted: codes } : {}) } as Packet);
    await this.save();
  }

  /** The connection ends: stop reading (what the client held goes back to the stream). */
  stopDelivery(): void {
    for (const e of this.entries.values()) {
      closeSubscription(e.sub);
      if (e.sub.options.noLocal) this.link.noLocal.count--;
      e.stored?.stop();
    }
  }

  /** A session that does not outlive its connection leaves no consumers behind. */
  async removeConsumers(): Promise<void> {
    await Promise.all(
      [...this.entries.values()].map((e) =>
        e.source ? StoredDelivery.remove(this.deps.services, this.link.account, e.source.stream, StoredDelivery.consumerName(this.link.account, this.link.clientId, e.sub.filter)) : undefined,
      ),
    );
  }

  async save(connected = true): Promise<void> {
    if (this.expirySec <= 0) return;
    const session: StoredSession = {
      subscriptions: [...this.entries.values()].map((e) => ({
        subscription: {
          topic: e.sub.filter,
          qos: e.sub.options.qos,
          nl: e.sub.options.noLocal,
          rap: e.sub.options.retainAsPublished,
          rh: e.sub.retainHandling,
        },
        subscriptionId: e.sub.options.subscriptionId,
        stream: e.source?.stream,
      })),
      expiresAt: Date.now() + this.expirySec * 1000,
      owner: this.deps.gatewayId,
      connected,
    };
    await this.deps.store.save(this.link.account, this.link.clientId, session).catch((e: Error) => {
      this.link.log.warn({ err: e.message }, "could not save the MQTT session");
    });
  }

  private async open(plan: Omit<ActiveSubscription, "nats">, withStored = true): Promise<Entry> {
    const { link } = this;
    const source = this.storedSourceOf(plan);
    if (plan.options.noLocal) link.noLocal.count++;
    const sub = openSubscription(
      link.lease.nc,
      plan,
      (s, subject, headers, data, reply) => this.deliver(s, subject, headers, data, reply),
      // Dropped before any header is read: most of what such a subscription hears are these copies.
      source ? (m) => this.consumerDelivers(entry, m) : undefined,
    );
    const entry: Entry = { sub, source };
    this.entries.set(plan.filter, entry);
    if (withStored) await this.startStored(entry);
    return entry;
  }

  /**
   * The core copy of a message the subscription's consumer delivers: skipped live. A bound
   * stream keeps every Mqgw-QoS 1/2 message on its subjects; the MQTT store only what a
   * gateway client published (marked by its Nats-Msg-Id) to a subject no binding stores.
   */
  private consumerDelivers(entry: Entry, m: Msg): boolean {
    const source = entry.source;
    if (!source) return false;
    if (source.kind === "bound") return carriesQos12(m);
    if (!storedCopy(m)) return false;
    return !source.partial || this.deps.bindings.storedIn(this.link.account, m.subject) === undefined;
  }

  /**
   * The durable consumer of a QoS 1/2 subscription with a stored source. It reads with the
   * gateway's own user, so it starts only after NATS granted the client's subscription.
   */
  private async startStored(entry: Entry, ownerGone = false): Promise<void> {
    const { link } = this;
    const { sub, source } = entry;
    if (!source || this.entries.get(sub.filter) !== entry) return;
    const prefix = source.kind === "store" ? MSGS_PREFIX : "";
    try {
      // The MQTT store is made on first use, by a subscriber as well as a publisher.
      if (source.kind === "store" && (await this.deps.messages.ensure(link.account)) === undefined) throw new Error("no MQTT store in this account");
      const stored = await StoredDelivery.open({
        services: this.deps.services,
        account: link.account,
        stream: source.stream,
        name: StoredDelivery.consumerName(link.account, link.clientId, sub.filter),
        subjects: sub.subjects.map((s) => prefix + s),
        maxAckPending: Math.min(link.settings.receiveMaximum, 65535),
        inactiveMs: this.expirySec * 1000,
        onMessage: (m, d) => this.deliverStored(sub, prefix, m, d),
        ownerGone,
        log: link.log,
      });
      // Closed meanwhile (UNSUBSCRIBE, the same filter subscribed again, the connection ending).
      if (this.entries.get(sub.filter) === entry && sub.nats.length > 0) entry.stored = stored;
      else stored.stop();
    } catch (e) {
      link.log.warn({ filter: sub.filter, stream: source.stream, err: (e as Error).message }, "stored delivery unavailable; live delivery only");
      // Its copies now come from core NATS.
      if (this.entries.get(sub.filter) === entry) entry.source = undefined;
    }
  }

  private close(filter: string, removeConsumer: boolean): boolean {
    const e = this.entries.get(filter);
    if (!e) return false;
    closeSubscription(e.sub);
    if (e.sub.options.noLocal) this.link.noLocal.count--;
    e.stored?.stop();
    this.entries.delete(filter);
    if (removeConsumer && e.source) {
      void StoredDelivery.remove(this.deps.services, this.link.account, e.source.stream, StoredDelivery.consumerName(this.link.account, this.link.clientId, filter));
    }
    return true;
  }

  /**
   * Where a QoS 1/2 subscription's messages are kept: the bound stream when one binding
   * covers every subject (as before the MQTT store: any session, a consumer per session
   * and filter), else the MQTT store for a session that outlives its connection. Shared
   * subscriptions are live only.
   */
  private storedSourceOf(plan: Omit<ActiveSubscription, "nats">): StoredSource | undefined {
    if (plan.options.qos === 0 || plan.queue) return undefined;
    let stream: string | undefined;
    let oneStream = true;
    let touchesBound = false;
    for (const subject of plan.subjects) {
      const c = this.deps.bindings.coverage(this.link.account, subject);
      if (c.kind === "unstored") {
        oneStream = false;
        continue;
      }
      touchesBound = true;
      if (c.kind === "mixed" || (stream !== undefined && stream !== c.stream.stream)) oneStream = false;
      else stream = c.stream.stream;
    }
    if (oneStream && stream !== undefined) return { kind: "bound", stream };
    if (this.expirySec <= 0 || !this.deps.messages.enabled()) return undefined;
    return { kind: "store", stream: this.deps.messages.streamName(), partial: touchesBound };
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
    if (!this.fits(out.topic, data)) return;
    if (out.qos === 0 && link.queuedBytes() > link.settings.maxQueuedBytes) {
      // A slow consumer loses QoS 0 messages, not the gateway's memory (docs/decisions/mqtt-sessions.md).
      link.metrics.dropped("mqtt", "slow_consumer");
      return;
    }
    this.outbound.send(out);
    link.metrics.messageOut("mqtt", "delivered");
  }

  /** A message of the subscription's consumer; `prefix` is what its stream puts before the subject (the MQTT store's `$MQG.msgs.`). */
  private deliverStored(sub: ActiveSubscription, prefix: string, m: Msg, d: StoredDelivery, checked = false): void {
    if (this.held) {
      this.held.push(() => this.deliverStored(sub, prefix, m, d, checked));
      return;
    }
    const subject = prefix ? m.subject.slice(prefix.length) : m.subject;
    const may = checked || this.mayRead(sub, subject);
    if (may !== true) {
      // Denied: consumed for this client, which may not read it. Unknown (NATS away): left for redelivery.
      void may.then((yes) => (yes === true ? this.deliverStored(sub, prefix, m, d, true) : yes === false ? d.ack(m) : undefined));
      return;
    }
    const headers = headerPairsOf(m);
    if (!isQos12(headers)) {
      d.ack(m); // without Mqgw-QoS 1/2 it reaches the client from core NATS, live only
      return;
    }
    const out = natsToMqttPublish(subject, headers, m.data, undefined, sub.options, { protocolVersion: this.link.version, clientId: this.link.clientId, now: Date.now() });
    if (typeof out === "string" || !this.fits(out.topic, m.data)) {
      d.ack(m);
      return;
    }
    this.outbound.send(out, () => d.ack(m));
    this.link.metrics.messageOut("mqtt", "delivered_stored");
  }

  private async sendRetained(sub: ActiveSubscription): Promise<void> {
    const found = await this.deps.retained.matching(this.link.account, sub.subjects).catch(() => []);
    for (const r of found) {
      const may = this.mayRead(sub, r.subject);
      if (may === true || (await may) === true) this.deliver(sub, r.subject, r.headers, r.data, undefined, true);
    }
  }

  /**
   * May NATS deliver `subject` to this client? Retained and stored messages are read with
   * the gateway's own user, and a wildcard subscription NATS granted can still be denied
   * some of its subjects (deny lists apply on delivery). An exact subject NATS granted is
   * readable; any other is asked once with a probe subscription on the client's own
   * connection (docs/decisions/faults.md). Undefined: NATS could not be asked.
   */
  private mayRead(sub: ActiveSubscription, subject: string): true | Promise<boolean | undefined> {
    if (sub.subjects.includes(subject)) return true;
    const readable = (this.readable ??= new Map());
    let known = readable.get(subject);
    if (!known) {
      if (readable.size >= 10_000) readable.clear();
      known = this.probe(subject);
      readable.set(subject, known);
    }
    return known;
  }

  private async probe(subject: string): Promise<boolean | undefined> {
    const { nc } = this.link.lease;
    let probe: { unsubscribe(): void } | undefined;
    try {
      // Throws once the connection drains (the client left, its lease let go): unknown.
      probe = nc.subscribe(subject, { callback: () => {} });
      // A refused subscription is answered with -ERR before the flush's PONG.
      await flushAndSettle(nc);
      return !this.link.denied.subscribe.delete(subject);
    } catch {
      this.readable?.delete(subject);
      return undefined;
    } finally {
      probe?.unsubscribe();
    }
  }

  private fits(topic: string, data: Uint8Array): boolean {
    if (data.byteLength + topic.length + 64 <= this.clientMaxPacket) return true;
    this.link.metrics.dropped("mqtt", "too_large_for_client");
    return false;
  }
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
