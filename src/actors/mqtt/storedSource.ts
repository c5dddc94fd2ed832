import type { Msg } from "@nats-io/transport-node";
import type { Bindings } from "../bindings.js";
import type { MessageStore } from "../messageStore.js";
import { carriesQos12, storedCopy } from "./natsHeaders.js";
import type { ActiveSubscription } from "./subscriptions.js";

/**
 * A QoS 1/2 subscription's stored messages (docs/decisions/mqtt-store.md): the stream a
 * binding names when one covers all its subjects, else the MQTT store. `partial`: some of
 * its subjects are bound, and the store holds none of theirs, so those come live.
 */
export type StoredSource =
  | { readonly kind: "bound"; readonly stream: string }
  | { readonly kind: "store"; readonly stream: string; readonly partial: boolean };

/**
 * Where a QoS 1/2 subscription of a persistent session reads its messages: the bound stream
 * when one binding covers every subject, else the MQTT store. (A session that ends with its
 * connection has nothing to hand back on a later one: the caller asks only for persistent
 * sessions.) A shared subscription belongs to no session: it reads core NATS only.
 */
export function storedSourceOf(
  plan: Omit<ActiveSubscription, "nats">,
  account: string,
  bindings: Bindings,
  messages: MessageStore,
): StoredSource | undefined {
  if (plan.options.qos === 0 || plan.queue) return undefined;
  const coverage = plan.subjects.map((subject) => bindings.coverage(account, subject));
  const streams = new Set(coverage.flatMap((c) => (c.kind === "stored" ? [c.stream.stream] : [])));
  const [stream] = streams;
  if (stream !== undefined && streams.size === 1 && coverage.every((c) => c.kind === "stored"))
    return { kind: "bound", stream };
  if (!messages.enabled()) return undefined;
  return { kind: "store", stream: messages.streamName(), partial: coverage.some((c) => c.kind !== "unstored") };
}

/**
 * The core copy of a message the subscription's consumer delivers: skipped live. A bound
 * stream keeps every Mqgw-QoS 1/2 message on its subjects; the MQTT store only what a
 * gateway client published (marked by its Nats-Msg-Id) to a subject no binding stores.
 */
export function consumerDelivers(
  source: StoredSource,
  m: Pick<Msg, "headers">,
  account: string,
  bindings: Bindings,
  /** The message's subject; a stored copy's own is the MQTT store's (prefixed). */
  subject: string,
): boolean {
  if (source.kind === "bound") return carriesQos12(m);
  if (!storedCopy(m)) return false;
  return !source.partial || bindings.storedIn(account, subject) === undefined;
}
