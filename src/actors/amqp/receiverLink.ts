import type { ConsumerInfo } from "@nats-io/jetstream";
import { AckPolicy, DeliverPolicy } from "@nats-io/jetstream";
import { createInbox, nanos } from "@nats-io/transport-node";
import type { Delivery, EventContext, Sender } from "rhea";
import type { Actor } from "xstate";
import type { amqpReceiverLinkMachine, LinkError } from "../../machines/amqpLink.js";
import { classifySource, tooManyTokens } from "../../protocol/amqpAddress.js";
import type { LinkContext } from "./context.js";
import { coreFeed } from "./coreFeed.js";
import type { Feed, FeedSink, Outcome, Pending } from "./feed.js";
import { jetStreamFeed } from "./jsFeed.js";
import type { LinkEdge } from "./linkActor.js";
import { detachedByClient, failLink, sendIfActive } from "./linkActor.js";
import { natsToAmqp } from "./outbound.js";
import { completeDrain, creditOf, sendableCount, setLocalAttach, unsentTransfers } from "./rhea.js";
import { consumerLookupError, planSource, queueProblem, type SettleMode, type SourcePlan } from "./sources.js";

type Machine = typeof amqpReceiverLinkMachine;

const asLinkError = (e: unknown): LinkError =>
  typeof (e as LinkError | null)?.condition === "string"
    ? (e as LinkError)
    : { condition: "amqp:internal-error", description: e instanceof Error ? e.message : String(e) };

/** The consumer the gateway makes for a stored source lives as long as the link (and a while longer if the gateway dies). */
const STREAM_CONSUMER_INACTIVE_MS = 10 * 60_000;
const DEFAULT_ACK_WAIT_MS = 30_000;

/**
 * A link the client receives on: NATS (core or JetStream) -> AMQP. Holds at most as many
 * messages as the client has credit for (a core subscription's overflow is dropped and
 * counted), sends them as credit arrives, and passes each disposition to the feed.
 */
export class ReceiverLink implements LinkEdge<Machine>, FeedSink {
  private actor!: Actor<Machine>;
  private feed: Feed | undefined;
  private plan: SourcePlan | undefined;
  private settled = false;
  private readonly queue: Pending[] = [];
  private readonly unsettled = new Map<Delivery, Pending>();
  private active = false;
  /** NATS is there to ask (what is held still goes out while it is not). */
  private online = true;
  private draining = false;
  private pumpScheduled = false;
  private attachFault: LinkError | undefined;
  private createdConsumer: { stream: string; name: string } | undefined;
  private readonly unlisten: Array<() => void> = [];
  private done = false;

  constructor(
    private readonly link: Sender,
    private readonly ctx: LinkContext,
    /** Set when the connection already knows the attach must be refused (too many links). */
    private readonly refusal?: LinkError,
  ) {}

  commands(): ReturnType<LinkEdge<Machine>["commands"]> {
    return {
      // Emitted while the machine starts, before start() has handed the actor over.
      resolve: () => queueMicrotask(() => void this.resolve().catch((e: unknown) => this.fail(e))),
      attach: ({ address }) => this.attach(address),
      refuse: ({ error }) => this.refuse(error),
      detach: ({ error }) => this.link.close(error),
      flow: () => {
        this.active = true;
        this.online = true;
        this.pump();
      },
      hold: () => {
        this.online = false;
        this.feed?.hold();
      },
      drain: () => void this.drain().catch((e: unknown) => this.fail(e)),
      release: () => this.cleanup(),
    };
  }

  start(actor: Actor<Machine>): void {
    this.actor = actor;
    const l = this.link;
    l.on("sender_flow", () => this.schedulePump());
    l.on("sendable", () => this.schedulePump());
    l.on("sender_draining", () => sendIfActive(this.actor, { type: "DRAIN" }));
    l.on("accepted", (c: EventContext) => this.outcome(c, "accepted"));
    l.on("rejected", (c: EventContext) => this.outcome(c, "rejected"));
    l.on("released", (c: EventContext) => this.outcome(c, "released"));
    l.on("modified", (c: EventContext) => {
      const state = c.delivery?.remote_state as { undeliverable_here?: boolean; delivery_failed?: boolean } | undefined;
      this.outcome(c, state?.undeliverable_here ? "undeliverable" : state?.delivery_failed ? "failed" : "released");
    });
    // Settled with no outcome: the message was not processed.
    l.on("settled", (c: EventContext) => this.outcome(c, "released"));
    l.on("sender_close", () => this.detachedByClient());
    l.on("sender_error", () => this.detachedByClient());
    this.unlisten.push(
      this.ctx.lease.onStatus((s) => sendIfActive(this.actor, { type: s === "up" ? "NATS_UP" : "NATS_DOWN" })),
    );
  }

  fail(e: unknown): void {
    failLink(this.actor, this.ctx.log, e);
  }

  detachedByClient(): void {
    detachedByClient(() => this.actor);
  }

  cleanup(): void {
    if (this.done) return;
    this.done = true;
    this.active = false;
    for (const u of this.unlisten.splice(0)) u();
    this.feed?.close();
    this.queue.length = 0;
    this.unsettled.clear();
    const made = this.createdConsumer;
    if (made)
      void this.ctx
        .jsm()
        .then((jsm) => jsm.consumers.delete(made.stream, made.name))
        .catch(() => {});
  }

  // -- attach -------------------------------------------------------------------------

  private async resolve(): Promise<void> {
    if (this.refusal) return sendIfActive(this.actor, { type: "REFUSED", error: this.refusal });
    const source = this.link.source as { address?: string; dynamic?: boolean } | null | undefined;
    const classified = classifySource(source?.address, source?.dynamic === true);
    if (!classified.ok) return this.refused(classified.error);
    if (classified.value.kind !== "dynamic") {
      // Queue addresses too: the part before `::` is the subject the queue reads.
      const deep = tooManyTokens(classified.value.subject, this.ctx.maxTopicLevels);
      if (deep) return this.refused(deep);
    }
    const mode = (this.link.snd_settle_mode ?? 2) as SettleMode;
    let plan: SourcePlan;
    if (classified.value.kind === "dynamic") {
      plan = { kind: "core", subject: createInbox(), settled: mode === 1 };
    } else {
      const planned = planSource(classified.value, mode, (s) => this.ctx.bindings.coverage(this.ctx.account, s));
      if (!planned.ok) return this.refused(planned.error);
      plan = planned.value;
    }
    this.plan = plan;
    try {
      this.feed = await this.openFeed(plan);
    } catch (e) {
      return this.refused(asLinkError(e));
    }
    if (this.done) {
      // The link ended while its feed was being made.
      this.feed.close();
      return;
    }
    // A refused subscribe is reported before the flush's PONG.
    await this.ctx.lease.nc.flush().catch(() => {});
    if (this.attachFault) return this.refused(this.attachFault);
    this.settled = plan.kind === "core" ? plan.settled : plan.kind === "queue" ? plan.settled : false;
    sendIfActive(this.actor, {
      type: "RESOLVED",
      address: classified.value.kind === "dynamic" ? plan.subject : (source?.address ?? null),
    });
  }

  private refused(error: LinkError): void {
    this.ctx.metrics.refused("amqp", error.condition.replace(/^amqp:/, ""));
    sendIfActive(this.actor, { type: "REFUSED", error });
  }

  private async openFeed(plan: SourcePlan): Promise<Feed> {
    const { nc } = this.ctx.lease;
    if (plan.kind === "core") return coreFeed(nc, plan.subject, this);
    const jsm = await this.ctx.jsm().catch((e: Error) => {
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
      this.createdConsumer = { stream: plan.stream, name: info.name };
      if (this.done) void jsm.consumers.delete(plan.stream, info.name).catch(() => {});
    } else {
      info = await jsm.consumers.info(plan.stream, plan.consumer).catch((e: unknown) => {
        throw consumerLookupError(e, plan.stream, plan.consumer);
      });
      const bound = this.ctx.bindings.all().find((b) => b.stream === plan.stream);
      const problem = queueProblem(info, plan.subject, bound?.subjects ?? []);
      if (problem) throw problem;
    }
    return jetStreamFeed({
      nc,
      stream: plan.stream,
      consumer: info.name,
      sink: this,
      expiresMs: this.ctx.settings.pullExpiresMs,
      ackWaitMs: info.config.ack_wait ? info.config.ack_wait / 1_000_000 : DEFAULT_ACK_WAIT_MS,
    });
  }

  private attach(address: string | null): void {
    const source = this.link.source as { dynamic?: boolean } | null | undefined;
    setLocalAttach(this.link, {
      source: { address: address ?? undefined, ...(source?.dynamic ? { dynamic: true } : {}) },
      target: (this.link.target as unknown as Record<string, unknown> | null) ?? {},
      // What the gateway will do, which for a mixed request is its own choice.
      sndSettleMode: this.settled ? 1 : 0,
      rcvSettleMode: 0,
    });
    this.link.open();
    this.ctx.log.debug({ source: address, plan: this.plan?.kind, settled: this.settled }, "AMQP receiver attached");
  }

  private refuse(error: LinkError): void {
    // Part 2, 2.6.3: an attach with a null source, then a detach that says why.
    setLocalAttach(this.link, { target: (this.link.target as unknown as Record<string, unknown> | null) ?? {} });
    this.link.open();
    this.link.close(error);
  }

  // -- messages -------------------------------------------------------------------------

  offer(m: Pending): void {
    if (this.done) return;
    if (this.queue.length >= this.ctx.settings.maxQueuedPerLink) {
      // Only a core subscription outruns credit; JetStream is pulled no further than credit.
      this.queue.shift();
      this.ctx.metrics.dropped("amqp", "slow_consumer");
    }
    this.queue.push(m);
    this.schedulePump();
  }

  refill(): void {
    this.schedulePump();
  }

  fault(error: LinkError): void {
    if (this.actor.getSnapshot().matches("attaching")) this.attachFault = error;
    else sendIfActive(this.actor, { type: "FAULT", error });
  }

  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    // A burst of NATS messages arrives in one parse: one pump for all of them.
    queueMicrotask(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    if (!this.active || this.done || !this.link.is_open()) return;
    const limit = this.link.max_message_size || Number.POSITIVE_INFINITY;
    let room = sendableCount(this.link);
    while (room > 0 && this.queue.length > 0) {
      const m = this.queue.shift()!;
      const bytes = natsToAmqp(m.subject, m.headers, m.data, m.reply, m.ack?.redeliveries ?? 0);
      if (bytes.length > limit) {
        // The client said it cannot take this one; a stored copy is not offered to it again.
        this.feed?.settle(m, "undeliverable");
        this.ctx.metrics.dropped("amqp", "too_large_for_client");
        continue;
      }
      const d = this.link.send(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), undefined, 0);
      this.ctx.metrics.messageOut("amqp", "delivered");
      if (this.settled) this.feed?.settle(m, "accepted");
      else this.unsettled.set(d, m);
      room--;
    }
    if (!this.draining && this.online) this.feed?.want(this.uncovered());
  }

  /** Credit the queue does not already cover. */
  private uncovered(): number {
    return Math.max(0, creditOf(this.link) - unsentTransfers(this.link) - this.queue.length);
  }

  private outcome(c: EventContext, outcome: Outcome): void {
    const d = c.delivery;
    if (!d) return;
    const m = this.unsettled.get(d);
    if (!m) return;
    this.unsettled.delete(d);
    this.feed?.settle(m, outcome);
    if (!d.remote_settled) d.update(true);
    this.ctx.metrics.messageOut("amqp", outcome);
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      this.pump();
      const n = this.uncovered();
      if (n > 0) await this.feed?.drain(n);
      this.pump();
      // The drained flow must not overtake transfers rhea has not written yet.
      for (let i = 0; i < 100 && unsentTransfers(this.link) > 0; i++) await new Promise((r) => setImmediate(r));
      if (this.active && this.link.is_open()) completeDrain(this.link);
    } finally {
      this.draining = false;
      sendIfActive(this.actor, { type: "DRAINED" });
    }
  }
}
