import type { Msg } from "@nats-io/transport-node";
import type { ISubscription } from "mqtt-packet";
import { clientReply, coreDeliverable } from "../../protocol/deliveryGuard.js";
import { Reason } from "../../protocol/mqttReasons.js";
import { isAdminSubject } from "../../protocol/mqttToNats.js";
import { tooLong } from "../../protocol/natsLimits.js";
import type { SubscriptionOptions } from "../../protocol/natsToMqtt.js";
import type { Result } from "../../protocol/result.js";
import { err, ok } from "../../protocol/result.js";
import { filterToSubscription } from "../../protocol/topic.js";
import { headerPairsReader } from "../client/headerPairs.js";
import type { NatsSeam } from "../client/natsSeam.js";
import type { CoreInterest } from "../client/sharedSubscriptions.js";
import type { MqttSettings } from "./settings.js";

/** One MQTT subscription: its filter, options and the NATS subscriptions behind it. */
export interface ActiveSubscription {
  readonly filter: string;
  readonly options: SubscriptionOptions;
  readonly subjects: string[];
  readonly queue: string | undefined;
  readonly retainHandling: number;
  /** Per NATS subject: a queue subscription of its own, or a part in the connection's shared one. */
  nats: CoreInterest[];
}

export type OnMessage = (
  sub: ActiveSubscription,
  subject: string,
  headers: Iterable<[string, string]> | undefined,
  data: Uint8Array,
  reply: string | undefined,
  /** The subscription's own, or those of every overlapping one this copy stands for (overlaps.ts). */
  options: SubscriptionOptions,
) => void;

/** A subscription request checked against the mapping and the gateway's own rules. */
export function planSubscription(
  s: ISubscription,
  subscriptionId: number | undefined,
  /** maxSubjectBytes: subject plus queue group bytes that fit a NATS SUB line (natsLimits.ts); 0 = no limit. The rest: what the CONNACK allowed. */
  settings: Pick<
    MqttSettings,
    "maxSubjectBytes" | "maximumQos" | "wildcardSubscriptionAvailable" | "sharedSubscriptionAvailable"
  >,
): Result<Omit<ActiveSubscription, "nats">, { reasonCode: number; reason: string }> {
  const { maxSubjectBytes } = settings;
  const mapped = filterToSubscription(s.topic);
  if (!mapped.ok) return err({ reasonCode: Reason.topicFilterInvalid, reason: mapped.error });
  if (mapped.value.queue !== undefined && !settings.sharedSubscriptionAvailable)
    return err({
      reasonCode: Reason.sharedSubscriptionsNotSupported,
      reason: "shared subscriptions are not available",
    });
  if (!settings.wildcardSubscriptionAvailable && mapped.value.subjects.some(hasWildcard))
    return err({
      reasonCode: Reason.wildcardSubscriptionsNotSupported,
      reason: "wildcard subscriptions are not available",
    });
  // Checked before the SUB goes out: nats-server closes a connection whose line is too long, and SUBACK would have said granted.
  if (mapped.value.subjects.some((subject) => tooLong(subject, mapped.value.queue, maxSubjectBytes))) {
    return err({
      reasonCode: Reason.topicFilterInvalid,
      reason: `filter longer than ${maxSubjectBytes} bytes as a NATS subject (nats.max_control_line)`,
    });
  }
  // `#` and `+/...` never reach $MQG: the $ rule keeps wildcard-first filters off $ topics.
  if (mapped.value.subjects.some(isAdminSubject)) {
    return err({ reasonCode: Reason.notAuthorized, reason: "$MQG is reserved for the gateway" });
  }
  return ok({
    filter: s.topic,
    subjects: mapped.value.subjects,
    queue: mapped.value.queue,
    retainHandling: s.rh ?? 0,
    options: {
      // Granted at most the Maximum QoS (MQTT 5 3.2.2.3.4: the server may grant less).
      qos: Math.min(s.qos, settings.maximumQos) as 0 | 1 | 2,
      noLocal: s.nl === true,
      retainAsPublished: s.rap === true,
      subscriptionId,
      dollarGuard: mapped.value.dollarGuard,
    },
  });
}

/** `+` and `#` are `*` and `>` tokens; a topic level of only `*` or `>` is refused before (topic.ts). */
function hasWildcard(subject: string): boolean {
  return subject.split(".").some((t) => t === "*" || t === ">");
}

/** Opens the NATS subscriptions of a planned MQTT subscription on the client's connection. */
export function openSubscription(
  nats: NatsSeam,
  plan: Omit<ActiveSubscription, "nats">,
  onMessage: OnMessage,
  /**
   * The options a message goes out with, decided before its headers are read; undefined:
   * dropped (the QoS 1/2 copies a consumer delivers, the copy another overlapping
   * subscription of the client sends).
   */
  decide?: (sub: ActiveSubscription, m: Msg) => SubscriptionOptions | undefined,
): ActiveSubscription {
  const active: ActiveSubscription = { ...plan, nats: [] };
  for (const subject of plan.subjects) {
    const headerPairsOf = headerPairsReader();
    const deliver = (m: Msg): void => {
      const options = decide ? decide(active, m) : active.options;
      if (options === undefined) return;
      const reply = m.reply || undefined;
      // The gateway's own traffic and JetStream deliveries routed to an inbox this
      // subscription matches are not the client's (deliveryGuard.ts).
      if (!coreDeliverable(subject, m.subject, reply)) return;
      onMessage(active, m.subject, headerPairsOf(m), m.data, clientReply(reply), options);
    };
    // A queue group's members are balanced by NATS, each its own SUB; the rest share one per subject.
    active.nats.push(
      plan.queue
        ? nats.subscribe(subject, {
            queue: plan.queue,
            callback: (e, m) => {
              if (!e) deliver(m);
            },
          })
        : nats.share(subject, deliver),
    );
  }
  return active;
}

/** `lingerMs`: how long a SUB this leaves with no holder stays for a resume (sharedSubscriptions.ts); 0: gone now. */
export function closeSubscription(sub: ActiveSubscription, lingerMs = 0): void {
  for (const s of sub.nats) {
    if (lingerMs > 0 && s.leave) s.leave(lingerMs);
    else s.unsubscribe();
  }
  sub.nats = [];
}

/** NATS granted every SUB behind it already (CoreInterest.granted): its verdict needs no round trip. */
export function grantedAll(sub: ActiveSubscription): boolean {
  return sub.nats.every((n) => n.granted?.() === true);
}

/** NATS refused one subject of a subscription (the parent level of `a/#`, or on a reload): it goes, the rest stays. */
export function dropSubject(sub: ActiveSubscription, subject: string): void {
  for (const n of sub.nats) if (n.getSubject() === subject) n.unsubscribe();
  sub.nats = sub.nats.filter((n) => n.getSubject() !== subject);
  // Nor is it read for this subscription from the retained stream or a consumer.
  const at = sub.subjects.indexOf(subject);
  if (at >= 0) sub.subjects.splice(at, 1);
}
