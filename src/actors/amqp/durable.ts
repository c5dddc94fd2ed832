/**
 * Durable subscriptions on stored addresses (docs/decisions/amqp-durable.md): a named
 * JetStream consumer per client container-id and link name, kept while the client is
 * away and deleted when it detaches with closed=true (JMS unsubscribe).
 */
import { createHash } from "node:crypto";
import { AckPolicy, type ConsumerInfo, DeliverPolicy, type JetStreamManager } from "@nats-io/jetstream";
import { nanos } from "@nats-io/transport-node";
import type { LinkError } from "../../machines/amqpLink.js";
import { consumerLookupError } from "./sources.js";

/** The consumer metadata key holding a digest of the subscription's filters (docs/decisions/amqp-filters.md). */
const FILTERS_KEY = "mqgw_amqp_filters";

/**
 * The durable consumer of `name` on `stream`, made (or remade, for another address or
 * other filters) as needed. `filters`: the link's filters as canonical text, "" for none.
 */
export async function openDurable(
  jsm: JetStreamManager,
  stream: string,
  name: string,
  subject: string,
  ackWaitMs: number,
  filters = "",
): Promise<ConsumerInfo> {
  const digest = filters === "" ? "" : createHash("sha256").update(filters).digest("hex");
  let info = await existing(jsm, stream, name);
  if (
    info &&
    (info.config.filter_subject !== subject ||
      info.config.deliver_subject ||
      (info.config.metadata?.[FILTERS_KEY] ?? "") !== digest)
  ) {
    // JMS: a durable subscription asked for on another topic, or with another selector, is a new subscription.
    await jsm.consumers.delete(stream, name).catch(() => {});
    info = undefined;
  }
  return (
    info ??
    (await jsm.consumers
      .add(stream, {
        durable_name: name,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.New,
        filter_subject: subject,
        ack_wait: nanos(ackWaitMs),
        // The messages its filters passed over were acked: other filters need a fresh consumer.
        ...(digest !== "" ? { metadata: { [FILTERS_KEY]: digest } } : {}),
      })
      .catch((e: unknown) => {
        throw consumerLookupError(e, stream, name);
      }))
  );
}

/** The address of an existing durable subscription of this name on one of `streams`, if any. */
export async function findDurable(
  jsm: JetStreamManager,
  streams: readonly string[],
  name: string,
): Promise<string | undefined> {
  for (const stream of streams) {
    const info = await existing(jsm, stream, name).catch(() => undefined);
    if (info?.config.filter_subject) return info.config.filter_subject;
  }
  return undefined;
}

async function existing(jsm: JetStreamManager, stream: string, name: string): Promise<ConsumerInfo | undefined> {
  try {
    return await jsm.consumers.info(stream, name);
  } catch (e) {
    const error: LinkError = consumerLookupError(e, stream, name);
    if (error.condition === "amqp:not-found") return undefined;
    throw error;
  }
}
