/**
 * The feed of a receiving link's plan (sources.ts): a core subscription, or a JetStream
 * consumer (made for the link, a durable subscription, or an operator's queue) read
 * under the client's read grant. Moved out of receiverLink.ts, which keeps credit and the queue.
 */
import type { ConsumerInfo } from "@nats-io/jetstream";
import { AckPolicy, DeliverPolicy } from "@nats-io/jetstream";
import { nanos } from "@nats-io/transport-node";
import type { LinkError } from "../../machines/amqpLink.js";
import type { NatsLease } from "../client/natsBridge.js";
import { holdReadGrant } from "../client/readGrant.js";
import type { LinkContext } from "./context.js";
import { coreFeed } from "./coreFeed.js";
import { openDurable } from "./durable.js";
import { type Feed, type FeedSink, grantedFeed, unauthorizedRead } from "./feed.js";
import { jetStreamFeed } from "./jsFeed.js";
import { consumerLookupError, queueProblem, type SourcePlan } from "./sources.js";

/** The consumer the gateway makes for a stored source lives as long as the link (and a while longer if the gateway dies). */
const STREAM_CONSUMER_INACTIVE_MS = 10 * 60_000;
const DEFAULT_ACK_WAIT_MS = 30_000;

/** What the link learns while its feed is made: the consumers it must delete or keep. */
export interface FeedOwner {
  readonly ctx: LinkContext;
  readonly sink: FeedSink;
  /** The link ended meanwhile. */
  ended(): boolean;
  /** The gateway made this consumer for the link: deleted when the link goes. */
  made(consumer: { stream: string; name: string }): void;
  /** The durable subscription's consumer: kept unless the client closes the link. */
  durable(consumer: { stream: string; name: string }): void;
  /** The link's filters as canonical text ("" for none): a durable subscription is made for them. */
  readonly filters: string;
}

export async function openFeed(plan: SourcePlan, o: FeedOwner): Promise<Feed> {
  const { nats } = o.ctx.lease;
  if (plan.kind === "core") return coreFeed(nats, plan.subject, o.sink);
  // The JetStream API reads a stream whatever the subject: the client's permission to
  // read it is held, and withdrawn, where NATS judges it (readGrant.ts). Until the
  // flush, a refusal is the attach's; after it, a withdrawal ends the link.
  let verdict = { kind: "asking" } as { kind: "asking" | "granted" } | { kind: "refused"; message: string };
  const grant = holdReadGrant(nats, plan.subject, (message) => {
    if (verdict.kind === "granted") o.sink.fault(unauthorizedRead(plan.subject, message));
    else verdict = { kind: "refused", message };
  });
  try {
    // NATS answers a refused SUB before the PONG: no consumer is made for a reader it refuses.
    await nats.taken().catch(() => {});
    if (verdict.kind === "refused") throw unauthorizedRead(plan.subject, verdict.message);
    verdict = { kind: "granted" };
    return grantedFeed(await openStoredFeed(plan, nats, o), grant);
  } catch (e) {
    grant.release();
    throw e;
  }
}

async function openStoredFeed(
  plan: Exclude<SourcePlan, { kind: "core" }>,
  nats: NatsLease["nats"],
  o: FeedOwner,
): Promise<Feed> {
  const jsm = await o.ctx.jsm().catch((e: Error) => {
    throw {
      condition: "amqp:internal-error",
      description: `JetStream is not available: ${e.message}`,
    } satisfies LinkError;
  });
  let info: ConsumerInfo;
  if (plan.kind === "stream") {
    info = await jsm.consumers
      .add(plan.stream, {
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.New,
        filter_subject: plan.subject,
        ack_wait: nanos(DEFAULT_ACK_WAIT_MS),
        inactive_threshold: nanos(STREAM_CONSUMER_INACTIVE_MS),
      })
      .catch((e: unknown) => {
        throw consumerLookupError(e, plan.stream, "(new)");
      });
    o.made({ stream: plan.stream, name: info.name });
    if (o.ended()) void jsm.consumers.delete(plan.stream, info.name).catch(() => {});
  } else if (plan.kind === "durable") {
    info = await openDurable(jsm, plan.stream, plan.consumer, plan.subject, DEFAULT_ACK_WAIT_MS, o.filters);
    o.durable({ stream: plan.stream, name: info.name });
  } else {
    info = await jsm.consumers.info(plan.stream, plan.consumer).catch((e: unknown) => {
      throw consumerLookupError(e, plan.stream, plan.consumer);
    });
    const bound = o.ctx.bindings.all().find((b) => b.stream === plan.stream);
    const problem = queueProblem(info, plan.subject, bound?.subjects ?? []);
    if (problem) throw problem;
  }
  return jetStreamFeed({
    nats,
    stream: plan.stream,
    consumer: info.name,
    source: plan.subject,
    sink: o.sink,
    expiresMs: o.ctx.settings.pullExpiresMs,
    ackWaitMs: info.config.ack_wait ? info.config.ack_wait / 1_000_000 : DEFAULT_ACK_WAIT_MS,
    // An operator's queue is read by every receiver on it: what one link passes over is another's.
    shared: plan.kind === "queue",
    registry: o.ctx.registry,
  });
}
