import type { Msg } from "@nats-io/transport-node";
import { HEADER } from "../../protocol/headers.js";
import type { SubscriptionOptions } from "../../protocol/natsToMqtt.js";
import { patternsOverlap, subjectMatches } from "../../protocol/subjects.js";
import { deliverableTo, subjectToTopic } from "../../protocol/topic.js";
import { headerPairsOf } from "../client/headerPairs.js";
import type { ActiveSubscription } from "./subscriptions.js";

/** One non-shared subscription of the session, as the overlap rule sees it. */
export interface OverlapMember {
  readonly sub: ActiveSubscription;
  /** Its consumer delivers this message (so its core copy is skipped); undefined: it reads core NATS only. */
  readonly viaConsumer: ((m: Msg, subject: string) => boolean) | undefined;
}

interface Member extends OverlapMember {
  /** Subscribed before every member with a larger one: who delivers is decided by age. */
  readonly age: number;
  /** Members whose filters can match a topic this one matches, oldest first. */
  readonly peers: Member[];
  /**
   * `viaConsumer` once its consumer reads (consumerReading): until then the others deliver
   * their own copies, as a consumer made at SUBSCRIBE reads only what comes after it.
   */
  asPeer: OverlapMember["viaConsumer"];
}

const LOWER_CLIENT_ID = HEADER.mqttClientId.toLowerCase();

/**
 * A message that matches several non-shared subscriptions of one client goes out once, at
 * the highest QoS among them, carrying all their Subscription Identifiers [MQTT-3.3.4-2,
 * -4] (docs/decisions/overlapping-subscriptions.md). Every matching subscription hears
 * its own copy (core NATS or its consumer); exactly one of them is the one sent:
 *
 * - the oldest matching subscription whose consumer delivers the message and reads, if
 *   any (a stored copy keeps its stream's redelivery, and its ack covers the others);
 * - else the oldest matching subscription's core copy.
 *
 * The others are dropped (a stored one acknowledged). Each copy reaches this rule with the
 * same headers and the same set of subscriptions, so all of them agree on which is sent.
 * Pairs of filters that can overlap are found when a subscription is added, so a
 * subscription without one costs a map lookup per message.
 */
export class Overlaps {
  /** Made on the first subscription (an idle connection has none). */
  private members: Map<ActiveSubscription, Member> | undefined;
  private nextAge = 0;

  constructor(private readonly clientId: string) {}

  /** A new subscription: the youngest. Shared ones stand apart (MQTT 5 section 4.8.2). */
  add(member: OverlapMember): void {
    if (member.sub.queue) return;
    const added: Member = { ...member, age: this.nextAge++, peers: [], asPeer: undefined };
    this.members ??= new Map();
    for (const other of this.members.values()) {
      if (!intersect(other.sub.subjects, added.sub.subjects)) continue;
      other.peers.push(added);
      added.peers.push(other);
    }
    this.members.set(member.sub, added);
  }

  /** The subscription's consumer reads (or, resumed, waits for its store): its copies count for the others. */
  consumerReading(sub: ActiveSubscription): void {
    const member = this.members?.get(sub);
    if (member) member.asPeer = member.viaConsumer;
  }

  remove(sub: ActiveSubscription): void {
    const gone = this.members?.get(sub);
    if (!gone) return;
    this.members?.delete(sub);
    for (const p of gone.peers) p.peers.splice(p.peers.indexOf(gone), 1);
  }

  /** A core NATS copy on `sub`: the options to send it with, or undefined when it is not the one sent. */
  core(sub: ActiveSubscription, m: Msg): SubscriptionOptions | undefined {
    const self = this.members?.get(sub);
    if (!self) return sub.options; // shared
    if (self.viaConsumer?.(m, m.subject)) return undefined;
    if (self.peers.length === 0) return sub.options;
    return this.decide(self, m, m.subject, false);
  }

  /** A copy `sub`'s consumer delivered, on `subject` (the MQTT store's prefix taken off): undefined when another copy is the one sent. */
  stored(sub: ActiveSubscription, m: Msg, subject: string): SubscriptionOptions | undefined {
    const self = this.members?.get(sub);
    if (!self || self.peers.length === 0) return sub.options;
    return this.decide(self, m, subject, true);
  }

  private decide(self: Member, m: Msg, subject: string, fromConsumer: boolean): SubscriptionOptions | undefined {
    const topic = subjectToTopic(subject);
    if (topic === undefined) return self.sub.options; // no client gets it (natsToMqtt.ts)
    const matching = [self];
    for (const p of self.peers) if (matches(p.sub, subject, topic)) matching.push(p);
    if (matching.length === 1) return self.sub.options;
    matching.sort((a, b) => a.age - b.age);
    const stored = matching.find((x) => (x === self ? fromConsumer : x.asPeer?.(m, subject)));
    const sender = stored ?? matching[0]!;
    if (sender !== self) return undefined;
    return this.merged(matching, m);
  }

  /** The options of the one copy: highest QoS, every identifier; a No Local subscription counts only for others' messages. */
  private merged(matching: readonly Member[], m: Msg): SubscriptionOptions | undefined {
    const own = matching.some((x) => x.sub.options.noLocal) && this.isOwn(m);
    const counted = own ? matching.filter((x) => !x.sub.options.noLocal) : matching;
    if (counted.length === 0) return undefined;
    let qos: 0 | 1 | 2 = 0;
    const ids: number[] = [];
    for (const { sub } of counted) {
      if (sub.options.qos > qos) qos = sub.options.qos;
      if (sub.options.subscriptionId !== undefined) ids.push(sub.options.subscriptionId);
    }
    return {
      qos,
      noLocal: false,
      retainAsPublished: counted.some((x) => x.sub.options.retainAsPublished),
      subscriptionIds: ids,
      // Each matching subscription passed its own `$` rule already (matches).
      dollarGuard: false,
    };
  }

  private isOwn(m: Msg): boolean {
    for (const [k, v] of headerPairsOf(m) ?? []) if (k.toLowerCase() === LOWER_CLIENT_ID) return v === this.clientId;
    return false;
  }
}

function intersect(a: readonly string[], b: readonly string[]): boolean {
  return a.some((x) => b.some((y) => patternsOverlap(x, y)));
}

/** The message reaches `sub`: one of its subjects matches, and its filter's `$` rule lets the topic through. */
function matches(sub: ActiveSubscription, subject: string, topic: string): boolean {
  if (!deliverableTo(topic, sub.options.dollarGuard)) return false;
  return sub.subjects.some((p) => p === subject || subjectMatches(p, subject));
}
