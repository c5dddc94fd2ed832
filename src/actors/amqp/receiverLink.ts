import { createInbox } from "@nats-io/transport-node";
import type { Delivery, EventContext, Sender } from "rhea";
import type { amqpReceiverLinkMachine, LinkError } from "../../machines/amqpLink.js";
import { addressTooLong, classifySource, tooManyTokens } from "../../protocol/amqpAddress.js";
import type { HeaderEntries, MessageMeta } from "../../protocol/headers.js";
import { LastMeta } from "../../protocol/headers.js";
import { tooLong } from "../../protocol/natsLimits.js";
import {
  closedByClient,
  completeDrain,
  creditOf,
  linkNameOf,
  nextPendingDeliveryOf,
  peerTerminus,
  sendableCount,
  setLocalAttach,
  unsentTransfers,
} from "../../vendor/rhea.js";
import { ActorTasks } from "../actorTasks.js";
import type { MachineActor } from "../machineActor.js";
import { tracedDelivery } from "../tracing/hops.js";
import type { LinkContext } from "./context.js";
import { findDurable } from "./durable.js";
import { type Feed, type FeedSink, type Outcome, type Pending, rejectionReason } from "./feed.js";
import type { LinkEdge } from "./linkActor.js";
import { detachedByClient, failLink, sendIfActive } from "./linkActor.js";
import { LinkFilter } from "./linkFilter.js";
import { natsToAmqp } from "./outbound.js";
import type { OutflowLink } from "./outflow.js";
import {
  durableConsumerName,
  durableSource,
  planSource,
  type SettleMode,
  type SourcePlan,
  type SourceTerminus,
} from "./sources.js";
import { openFeed } from "./storedFeed.js";

type Machine = typeof amqpReceiverLinkMachine;

const asLinkError = (e: unknown): LinkError =>
  typeof (e as LinkError | null)?.condition === "string"
    ? (e as LinkError)
    : { condition: "amqp:internal-error", description: e instanceof Error ? e.message : String(e) };

/** Bytes of core messages a link holds for a client that cannot take them now; the oldest go first. */
export const MAX_QUEUED_BYTES = 8 * 1024 * 1024;

/**
 * A link the client receives on: NATS (core or JetStream) -> AMQP. Sends as far as the
 * client's credit and its connection's outflow (bytes on their way to the client) allow,
 * and passes each disposition to the feed. What waits is bounded: a core subscription's
 * overflow is dropped oldest-first and counted; a stream is pulled no further than
 * credit and the queue bound allow, and not at all while the outflow is full.
 */
export class ReceiverLink implements LinkEdge<Machine>, FeedSink, OutflowLink {
  private actor!: MachineActor<Machine>;
  private feed: Feed | undefined;
  private plan: SourcePlan | undefined;
  /** The source's filter set in force (linkFilter.ts), if it asks for one. */
  private filter: LinkFilter | undefined;
  /** The gateway's snd-settle-mode (part 2, 2.8.2), as the plan decided it: 1 sends presettled. */
  private sndSettleMode: 0 | 1 = 0;
  private readonly queue: Pending[] = [];
  private queuedBytes = 0;
  /**
   * The delivery ids and sizes of transfers handed to rhea and not yet seen written,
   * oldest first from `writtenUpTo` on (rhea writes a session's deliveries in id order).
   */
  private readonly handedIds: number[] = [];
  private readonly handed: number[] = [];
  private writtenUpTo = 0;
  private handedBytes = 0;
  /** Each unsettled delivery's message and its size on the wire (held in the outflow until settled). */
  private readonly unsettled = new Map<Delivery, { m: Pending; bytes: number }>();
  /** A pump is queued for this microtask (a scheduling guard, docs/decisions/scheduling-guards.md). */
  private pumpScheduled = false;
  private createdConsumer: { stream: string; name: string } | undefined;
  /** The durable subscription this link reads: kept unless the client detaches with closed=true. */
  private durable: { stream: string; name: string } | undefined;
  private readonly unlisten: Array<() => void> = [];
  private work: ActorTasks | undefined;
  /** headersToMeta, once per run of messages with the same header pairs (coreFeed hands them as one array). */
  private readonly lastMeta = new LastMeta();
  private readonly readMeta = (h: HeaderEntries): MessageMeta =>
    this.lastMeta.read(h as Iterable<[string, string]>, false);

  constructor(
    private readonly link: Sender,
    private readonly ctx: LinkContext,
    /** Set when the connection already knows the attach must be refused (too many links). */
    private readonly refusal?: LinkError,
  ) {}

  commands(): ReturnType<LinkEdge<Machine>["commands"]> {
    return {
      // Emitted while the machine starts, before start() has handed the actor over.
      resolve: () => queueMicrotask(() => this.tasks().run(() => this.resolve())),
      attach: ({ address }) => this.attach(address),
      refuse: ({ error }) => this.refuse(error),
      detach: ({ error }) => this.link.close(error),
      // Emitted inside the transition: the pump reads the machine's tags once it is over.
      flow: () => this.schedulePump(),
      hold: () => this.feed?.hold(),
      drain: () => this.tasks().run(() => this.drain()),
      release: () => this.cleanup(),
    };
  }

  start(actor: MachineActor<Machine>): void {
    this.actor = actor;
    this.ctx.outflow.add(this);
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

  /** Its resolve and drains under way (made with the first), interrupted at cleanup; a failure fails the link. */
  private tasks(): ActorTasks {
    this.work ??= new ActorTasks((e) => this.fail(e));
    return this.work;
  }

  detachedByClient(): void {
    detachedByClient(() => this.actor);
  }

  /** The link is over: its machine ended (or was stopped with its connection). */
  private ended(): boolean {
    return this.actor.getSnapshot().status !== "active";
  }

  /** Runs at `release` and again from the actor's finalizer: each step is done once. */
  cleanup(): void {
    this.work?.close();
    for (const u of this.unlisten.splice(0)) u();
    this.feed?.close();
    this.feed = undefined;
    this.queue.length = 0;
    this.queuedBytes = 0;
    let held = 0;
    for (const u of this.unsettled.values()) held += u.bytes;
    this.unsettled.clear();
    this.ctx.outflow.remove(this);
    this.ctx.outflow.released(held);
    const made = this.createdConsumer ?? (this.durable && closedByClient(this.link) ? this.durable : undefined);
    this.createdConsumer = undefined;
    this.durable = undefined;
    // Outlives the link on purpose (its failure is dropped: an unused consumer goes after its inactive threshold).
    if (made)
      void this.ctx
        .jsm()
        .then((jsm) => jsm.consumers.delete(made.stream, made.name))
        .catch(() => {});
  }

  // -- attach -------------------------------------------------------------------------

  private async resolve(): Promise<void> {
    if (this.refusal) return sendIfActive(this.actor, { type: "REFUSED", error: this.refusal });
    const source = this.link.source as SourceTerminus | null | undefined;
    const name = durableConsumerName(this.ctx.containerId, linkNameOf(this.link));
    // Qpid JMS unsubscribes by attaching the subscription's link name with no source: the
    // answer names the subscription's address, then the client detaches with closed=true.
    const found = !source?.address && !source?.dynamic ? await this.lookUpDurable(name) : undefined;
    const durable = found !== undefined || durableSource(source) ? name : undefined;
    const address = found ?? source?.address;
    const classified = classifySource(address, source?.dynamic === true);
    if (!classified.ok) return this.refused(classified.error);
    if (classified.value.kind !== "dynamic") {
      // Queue addresses too: the part before `::` is the subject the queue reads.
      const deep = tooManyTokens(classified.value.subject, this.ctx.maxTopicLevels);
      if (deep) return this.refused(deep);
      // Before the SUB or consumer request: nats-server closes a connection whose line is too long.
      if (tooLong(classified.value.subject, undefined, this.ctx.settings.maxSubjectBytes))
        return this.refused(addressTooLong(this.ctx.settings.maxSubjectBytes));
    }
    const mode = (this.link.snd_settle_mode ?? 2) as SettleMode;
    let plan: SourcePlan;
    if (classified.value.kind === "dynamic") {
      plan = { kind: "core", subject: createInbox(), settled: mode === 1 };
    } else {
      const planned = planSource(
        classified.value,
        mode,
        (s) => this.ctx.bindings.coverage(this.ctx.account, s),
        durable,
      );
      if (!planned.ok) return this.refused(planned.error);
      plan = planned.value;
    }
    this.plan = plan;
    // Checked before any consumer is made: a selector past its bound is refused at attach.
    const filtered = LinkFilter.of((this.link.source as { filter?: Record<string, unknown> } | null)?.filter, (m) =>
      this.encode(m),
    );
    if (!filtered.ok) return this.refused(filtered.error);
    this.filter = filtered.value;
    try {
      this.feed = await openFeed(plan, {
        ctx: this.ctx,
        sink: this,
        ended: () => this.ended(),
        made: (c) => {
          this.createdConsumer = c;
        },
        durable: (c) => {
          this.durable = c;
        },
        filters: this.filter?.identity ?? "",
      });
    } catch (e) {
      return this.refused(asLinkError(e));
    }
    if (this.ended()) {
      // The link ended while its feed was being made.
      this.feed.close();
      this.feed = undefined;
      return;
    }
    // A refused subscribe is reported before the flush's PONG (a FAULT the machine keeps: the attach is refused).
    await this.ctx.lease.nats.taken().catch(() => {});
    this.sndSettleMode = plan.kind !== "stream" && plan.settled ? 1 : 0;
    sendIfActive(this.actor, {
      type: "RESOLVED",
      address: classified.value.kind === "dynamic" ? plan.subject : (address ?? null),
    });
  }

  private async lookUpDurable(name: string): Promise<string | undefined> {
    const account = this.ctx.account;
    const streams = this.ctx.bindings
      .all()
      .filter((b) => b.account === null || b.account === account)
      .map((b) => b.stream);
    if (streams.length === 0) return undefined;
    const jsm = await this.ctx.jsm().catch(() => undefined);
    return jsm ? findDurable(jsm, streams, name) : undefined;
  }

  private refused(error: LinkError): void {
    sendIfActive(this.actor, { type: "REFUSED", error });
  }

  private attach(address: string | null): void {
    const source = this.link.source as { dynamic?: boolean } | null | undefined;
    setLocalAttach(this.link, {
      source: {
        address: address ?? undefined,
        ...(source?.dynamic ? { dynamic: true } : {}),
        // The terminus the gateway keeps: unsettled-state, never expiring (part 3, 3.5.5).
        ...(this.durable ? { durable: 2, expiry_policy: "never" } : {}),
        // The filters in force, so the client knows which apply (part 3, 3.5.3).
        ...(this.filter ? { filter: this.filter.echo() } : {}),
      },
      target: peerTerminus(this.link, "target"),
      // What the gateway will do, which for a mixed request is its own choice.
      sndSettleMode: this.sndSettleMode,
      rcvSettleMode: 0,
    });
    this.link.open();
    this.ctx.log.debug(
      { source: address, plan: this.plan?.kind, settled: this.sndSettleMode === 1, filters: this.filter?.names },
      "AMQP receiver attached",
    );
  }

  private refuse(error: LinkError): void {
    // Every refused attach is counted here, whatever refused it (the address, the limits, a fault meanwhile).
    this.ctx.metrics.refused("amqp", error.condition.replace(/^amqp:/, ""));
    // Part 2, 2.6.3: an attach with a null source, then a detach that says why.
    setLocalAttach(this.link, { target: peerTerminus(this.link, "target") });
    this.link.open();
    this.link.close(error);
  }

  // -- messages -------------------------------------------------------------------------

  offer(m: Pending): void {
    if (this.ended()) return;
    if (this.filter && !this.filter.passes(m)) {
      // Not this receiver's: a stored message stays for the others (jsFeed.ts settles it so).
      this.feed?.settle(m, "skipped");
      this.ctx.metrics.messageOut("amqp", "filtered");
      this.schedulePump();
      return;
    }
    // Only a core subscription outruns the link: a stream is pulled no further than the queue's bound.
    while (
      this.queue.length > 0 &&
      !this.queue[0]!.ack &&
      (this.queue.length >= this.ctx.settings.maxQueuedPerLink || this.queuedBytes + m.data.length > MAX_QUEUED_BYTES)
    ) {
      this.queuedBytes -= this.queue.shift()!.data.length;
      this.ctx.metrics.dropped("amqp", "slow_consumer");
    }
    this.queue.push(m);
    this.queuedBytes += m.data.length;
    this.schedulePump();
  }

  refill(): void {
    this.schedulePump();
  }

  fault(error: LinkError): void {
    sendIfActive(this.actor, { type: "FAULT", error });
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
    const state = this.actor.getSnapshot();
    // Nothing goes to a client whose link is not attached (still attaching, detaching, over).
    if (!state.hasTag("attached") || !this.link.is_open()) return;
    const limit = this.link.max_message_size || Number.POSITIVE_INFINITY;
    const outflow = this.ctx.outflow;
    let room = sendableCount(this.link);
    let bytesRoom = outflow.room();
    while (room > 0 && this.queue.length > 0 && bytesRoom > 0) {
      const m = this.queue.shift()!;
      this.queuedBytes -= m.data.length;
      const bytes = this.filter?.take(m) ?? this.encode(m);
      if (bytes.length > limit) {
        // The client said it cannot take this one; a stored copy is not offered to it again.
        this.feed?.settle(m, "undeliverable");
        this.ctx.metrics.dropped("amqp", "too_large_for_client");
        continue;
      }
      const d = this.link.send(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), undefined, 0);
      this.handedIds.push(d.id);
      this.ctx.metrics.messageOut("amqp", "delivered");
      this.handed.push(bytes.length);
      this.handedBytes += bytes.length;
      bytesRoom -= bytes.length;
      if (this.sndSettleMode === 1) this.feed?.settle(m, "accepted");
      else {
        this.unsettled.set(d, { m, bytes: bytes.length });
        outflow.held(bytes.length);
      }
      room--;
    }
    if (bytesRoom <= 0) {
      // The client is not taking what it was sent: nothing more is asked of a stream until it does.
      outflow.wait(this);
      return;
    }
    // What is held still goes out while NATS is away; nothing more is asked of it then, nor during a drain.
    if (state.hasTag("natsUp") && !state.hasTag("draining")) this.feed?.want(this.uncovered());
  }

  private encode(m: Pending): Uint8Array {
    const headers = tracedDelivery(this.ctx.settings.tracing, m, this.ctx.containerId, this.sndSettleMode);
    return natsToAmqp(m.subject, headers, m.data, m.reply, m.ack?.redeliveries ?? 0, this.readMeta);
  }

  unsentBytes(): number {
    this.unsentCount();
    return this.handedBytes;
  }

  /**
   * Transfers handed to rhea and not yet written, in amortized O(1): rhea has written
   * every delivery of the session below its next pending id (session.js Outgoing.process).
   * Called per pump, where rhea.ts's unsentTransfers scans the session's pending deliveries.
   */
  private unsentCount(): number {
    const pending = this.ended() ? Number.POSITIVE_INFINITY : nextPendingDeliveryOf(this.link);
    while (this.writtenUpTo < this.handedIds.length && this.handedIds[this.writtenUpTo]! < pending)
      this.handedBytes -= this.handed[this.writtenUpTo++]!;
    if (this.writtenUpTo > 1024 && this.writtenUpTo * 2 > this.handed.length) {
      this.handed.splice(0, this.writtenUpTo);
      this.handedIds.splice(0, this.writtenUpTo);
      this.writtenUpTo = 0;
    }
    return this.handedIds.length - this.writtenUpTo;
  }

  /** Credit the queue does not already cover, up to what the queue may hold. */
  private uncovered(): number {
    const credit = creditOf(this.link) - this.unsentCount();
    return Math.max(0, Math.min(credit, this.ctx.settings.maxQueuedPerLink) - this.queue.length);
  }

  private outcome(c: EventContext, outcome: Outcome): void {
    const d = c.delivery;
    if (!d) return;
    const u = this.unsettled.get(d);
    if (!u) return;
    this.unsettled.delete(d);
    this.ctx.outflow.released(u.bytes);
    this.feed?.settle(u.m, outcome, outcome === "rejected" ? rejectionReason(d.remote_state) : undefined);
    if (!d.remote_settled) d.update(true);
    this.ctx.metrics.messageOut("amqp", outcome);
  }

  private async drain(): Promise<void> {
    // Emitted inside the transition into `draining`: what follows reads the new state.
    await Promise.resolve();
    try {
      this.pump();
      const n = this.uncovered();
      if (n > 0) await this.feed?.drain(n);
      this.pump();
      // The drained flow must not overtake transfers rhea has not written yet.
      for (let i = 0; i < 100 && unsentTransfers(this.link) > 0; i++) await new Promise((r) => setImmediate(r));
      if (this.actor.getSnapshot().hasTag("attached") && this.link.is_open()) completeDrain(this.link);
    } finally {
      sendIfActive(this.actor, { type: "DRAINED" });
    }
  }
}
