import { createInbox } from "@nats-io/transport-node";
import type { Delivery, EventContext, Receiver } from "rhea";
import type { amqpSenderLinkMachine, LinkError } from "../../machines/amqpLink.js";
import { addressTooLong, classifyTarget, tooManyTokens } from "../../protocol/amqpAddress.js";
import { tooLong } from "../../protocol/natsLimits.js";
import { creditOf, dropIncomplete, incompleteBytes, peerTerminus, rawOf, setLocalAttach } from "../../vendor/rhea.js";
import type { MachineActor } from "../machineActor.js";
import { newPublishId } from "../publishId.js";
import { tracedMessage } from "../tracing/hops.js";
import type { Hop } from "../tracing/tracing.js";
import type { LinkContext } from "./context.js";
import { amqpToNats, type NatsMessage, type Refusal } from "./inbound.js";
import type { LinkEdge } from "./linkActor.js";
import { detachedByClient, failLink, sendIfActive } from "./linkActor.js";
import type { Settlement } from "./publisher.js";

type Machine = typeof amqpSenderLinkMachine;

/**
 * A link the client sends on: AMQP -> NATS. The gateway keeps a window of credit open
 * and tops it up as deliveries are settled, so what is in flight is bounded; an
 * unsettled delivery is accepted only once NATS took it (or the stream stored it).
 */
export class SenderLink implements LinkEdge<Machine> {
  private actor!: MachineActor<Machine>;
  /** The subject every message goes to; null for the anonymous relay. */
  private target: string | null = null;
  private granted = 0;
  private received = 0;
  private inflight = 0;
  /** A credit top-up is queued for this turn (a scheduling guard, docs/decisions/scheduling-guards.md). */
  private topUpScheduled = false;
  /** Transfers that came after the gateway detached the link. */
  private afterFault = 0;
  private readonly unlisten: Array<() => void> = [];
  private readonly droppedLogged = new Set<string>();

  constructor(
    private readonly link: Receiver,
    private readonly ctx: LinkContext,
    private readonly refusal?: LinkError,
  ) {}

  commands(): ReturnType<LinkEdge<Machine>["commands"]> {
    return {
      // Emitted while the machine starts, before start() has handed the actor over.
      resolve: () =>
        queueMicrotask(() => {
          try {
            this.resolve();
          } catch (e) {
            this.fail(e);
          }
        }),
      attach: ({ address }) => this.attach(address),
      refuse: ({ error }) => {
        // Every refused attach is counted here, whatever refused it (the address, the limits, a transfer without credit).
        this.ctx.metrics.refused("amqp", error.condition.replace(/^amqp:/, ""));
        setLocalAttach(this.link, { source: peerTerminus(this.link, "source") });
        this.link.open();
        this.link.close(error);
      },
      detach: ({ error }) => this.link.close(error),
      // Emitted inside the transition: the grant reads the machine's tags once it is over.
      flow: () => queueMicrotask(() => this.grant()),
      // Credit already granted stays; no more is granted while NATS is away (`grant` reads the tag).
      hold: () => {},
      drain: () => {},
      release: () => this.cleanup(),
    };
  }

  start(actor: MachineActor<Machine>): void {
    this.actor = actor;
    this.link.on("message", (c: EventContext) => this.onMessage(c));
    this.link.on("receiver_close", () => this.detachedByClient());
    this.link.on("receiver_error", () => this.detachedByClient());
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

  /** Runs at `release` and again from the actor's finalizer: each step is done once. */
  cleanup(): void {
    for (const u of this.unlisten.splice(0)) u();
  }

  /** Transfers are taken only while the link is attached (not while attaching, detaching or after). */
  private attached(): boolean {
    return this.actor.getSnapshot().hasTag("attached");
  }

  /** Why the gateway detached the link, once it did (the machine keeps it). */
  private faultOf(): LinkError | undefined {
    const state = this.actor.getSnapshot();
    return state.hasTag("attached") ? undefined : state.context.error;
  }

  /**
   * Called after rhea read a chunk: a delivery still arriving in frames may not grow past
   * the limit, or a client could make the gateway buffer without end.
   */
  checkIncomplete(): void {
    if (this.actor.getSnapshot().status !== "active") return;
    const size = incompleteBytes(this.link);
    if (size === 0) return;
    if (this.faultOf()) {
      dropIncomplete(this.link);
      return;
    }
    if (size > this.ctx.maxMessageSize) {
      dropIncomplete(this.link);
      this.tooLarge(size);
    }
  }

  // -- attach -------------------------------------------------------------------------

  private resolve(): void {
    if (this.refusal) {
      sendIfActive(this.actor, { type: "REFUSED", error: this.refusal });
      return;
    }
    const t = this.link.target as { address?: string; dynamic?: boolean } | null | undefined;
    const classified = classifyTarget(t?.address, t?.dynamic === true);
    if (!classified.ok) return this.refuseAttach(classified.error);
    const target = classified.value;
    const deep = target.kind === "subject" ? tooManyTokens(target.subject, this.ctx.maxTopicLevels) : undefined;
    if (deep) return this.refuseAttach(deep);
    if (target.kind === "subject" && tooLong(target.subject, undefined, this.ctx.settings.maxSubjectBytes))
      return this.refuseAttach(addressTooLong(this.ctx.settings.maxSubjectBytes));
    this.target = target.kind === "subject" ? target.subject : target.kind === "dynamic" ? createInbox() : null;
    sendIfActive(this.actor, { type: "RESOLVED", address: this.target });
  }

  private refuseAttach(error: LinkError): void {
    sendIfActive(this.actor, { type: "REFUSED", error });
  }

  private attach(address: string | null): void {
    const t = this.link.target as { dynamic?: boolean } | null | undefined;
    setLocalAttach(this.link, {
      target: address === null ? {} : { address, ...(t?.dynamic ? { dynamic: true } : {}) },
      source: peerTerminus(this.link, "source"),
      sndSettleMode: this.link.snd_settle_mode ?? 2,
      rcvSettleMode: 0,
      maxMessageSize: this.ctx.maxMessageSize,
    });
    this.link.open();
  }

  // -- messages -------------------------------------------------------------------------

  /**
   * Credit is granted after the chunk rhea is reading: transfers in that chunk were sent
   * against the credit the client had, which is what `granted` must measure.
   */
  private topUp(): void {
    if (this.topUpScheduled) return;
    this.topUpScheduled = true;
    setImmediate(() => {
      this.topUpScheduled = false;
      this.grant();
    });
  }

  private grant(): void {
    // Credit only while attached and NATS is up (the machine's nats.online).
    if (!this.actor.getSnapshot().hasTag("natsUp")) return;
    const want = this.ctx.settings.senderCredit - this.inflight - creditOf(this.link);
    if (want <= 0) return;
    this.granted += want;
    this.link.add_credit(want);
  }

  private onMessage(c: EventContext): void {
    const d = c.delivery!;
    this.received++;
    if (this.received > this.granted) {
      // Part 2, 2.6.7: a sender may not transfer without credit (while attaching, the machine
      // keeps the fault and refuses the attach with it).
      this.fault(transferLimit());
      d.update(true);
      return;
    }
    if (!this.attached()) {
      if (++this.afterFault > this.ctx.settings.senderCredit) {
        // It was told, and goes on: the link's detach is not enough.
        this.ctx.closeConnection(
          "amqp:resource-limit-exceeded",
          "transfers kept coming on a link the gateway detached",
        );
      }
      // The link is going: an unsettled delivery gets the reason, not silence.
      const faulted = this.faultOf();
      if (!d.remote_settled && faulted) {
        d.reject(faulted);
        return;
      }
      d.update(true);
      return;
    }
    const raw = rawOf(c.message);
    const settled = d.remote_settled;
    if (!raw || d.format !== 0) {
      this.refuse(d, settled, {
        condition: "amqp:not-implemented",
        description: `message format ${d.format} is not AMQP 1.0 messages`,
        reason: "bad_format",
      });
      return;
    }
    if (raw.length > this.ctx.maxMessageSize) {
      this.tooLarge(raw.length, d);
      return;
    }
    // Before any work: a message over quota is not mapped, published or kept (docs/decisions/quotas.md).
    const over = this.ctx.quota.admit(raw.length);
    if (over) {
      this.refuse(d, settled, {
        condition: "amqp:resource-limit-exceeded",
        description: over,
        reason: "quota_exceeded",
      });
      return;
    }
    const mapped = amqpToNats(raw, {
      target: this.target,
      settled,
      containerId: this.ctx.containerId,
      routes: this.ctx.settings.routes,
      routeList: this.ctx.settings.routeList,
      now: Date.now(),
      maxSubjectBytes: this.ctx.settings.maxSubjectBytes,
    });
    if (!mapped.ok) {
      this.refuse(d, settled, mapped.error);
      return;
    }
    const tracing = this.ctx.settings.tracing;
    const m = tracing ? tracedMessage(tracing, mapped.value, this.hop(mapped.value, settled)) : mapped.value;
    // The relay's subject is the message's `to` (after its route): the same limit as a target's.
    const deep = this.target === null ? tooManyTokens(m.subject, this.ctx.maxTopicLevels) : undefined;
    if (deep) {
      this.refuse(d, settled, { ...deep, reason: "too_many_levels" });
      return;
    }
    this.inflight++;
    const result = settled ? this.ctx.publisher.publish(m) : this.publishUnsettled(m);
    if (settled) {
      // Nothing is owed to the client; rhea may forget the delivery now.
      d.update(true);
      this.inflight--;
      this.topUp();
    }
    void result.then((s) => this.settle(d, settled, s, m.subject));
  }

  /**
   * An unsettled message is kept for whoever must not miss it: the bound stream, or the
   * MQTT store for MQTT sessions that are away. Its Nats-Msg-Id is its own
   * (docs/decisions/publish-identity.md), or with amqp.dedupe_message_id the sender's
   * container and message-id, so a resend within the duplicate window is stored once.
   */
  private publishUnsettled(m: NatsMessage): Promise<Settlement> {
    const msgId =
      this.ctx.settings.dedupeMessageId && m.messageId !== undefined
        ? `${this.ctx.containerId}/${m.messageId}`
        : newPublishId();
    if (this.ctx.bindings.storedIn(this.ctx.account, m.subject) === undefined) return this.ctx.publisher.keep(m, msgId);
    // The stream ack is the answer; a stored message keeps reply-to only in Mqgw-Reply-To.
    return this.ctx.publisher.store({ ...m, reply: undefined }, msgId);
  }

  private settle(d: Delivery, settled: boolean, s: Settlement, subject: string): void {
    if (s.ok) this.ctx.metrics.messageIn("amqp", settled ? "published" : "accepted");
    else if (settled) this.drop(subject, s.reason, s.description);
    if (settled) return;
    this.inflight--;
    if (this.actor.getSnapshot().status === "active" && this.link.is_open()) {
      if (s.ok) d.accept();
      else {
        this.ctx.metrics.messageIn("amqp", "rejected");
        d.reject({ condition: s.condition, description: s.description });
      }
    }
    this.topUp();
  }

  private hop(m: NatsMessage, settled: boolean): Hop {
    const destination = this.target ?? m.subject;
    const { containerId: clientId } = this.ctx;
    return {
      protocol: "amqp",
      clientId,
      destination,
      subject: m.subject,
      qos: settled ? 0 : 1,
      size: m.payload.byteLength,
    };
  }

  /** CONTRACT: an unsettled message is rejected with the condition; a presettled one is dropped and counted. */
  private refuse(d: Delivery, settled: boolean, r: Refusal): void {
    if (settled) {
      this.drop(this.target ?? "(relay)", r.reason, r.description);
      d.update(true);
      this.topUp();
      return;
    }
    this.ctx.metrics.refused("amqp", r.reason);
    this.ctx.metrics.messageIn("amqp", "rejected");
    d.reject({ condition: r.condition, description: r.description });
    this.topUp();
  }

  private drop(subject: string, reason: string, description: string): void {
    this.ctx.metrics.dropped("amqp", reason);
    this.ctx.metrics.messageIn("amqp", "dropped");
    // Logged once per link and subject, so a flood of refusals is one line each.
    if (this.droppedLogged.size < 100 && !this.droppedLogged.has(subject)) {
      this.droppedLogged.add(subject);
      this.ctx.log.info(
        { client_id: this.ctx.containerId, subject, reason, description },
        "presettled AMQP message dropped",
      );
    }
  }

  private tooLarge(size: number, d?: Delivery): void {
    const error = {
      condition: "amqp:link:message-size-exceeded",
      description: `message of ${size} bytes exceeds max-message-size ${this.ctx.maxMessageSize}`,
    };
    this.ctx.metrics.refused("amqp", "message_too_large");
    if (d && !d.remote_settled) d.reject(error);
    else d?.update(true);
    this.fault(error);
  }

  /** The machine takes the first fault (detaching, or refusing the attach) and ignores the rest. */
  private fault(error: LinkError): void {
    sendIfActive(this.actor, { type: "FAULT", error });
  }
}

const transferLimit = (): LinkError => ({
  condition: "amqp:link:transfer-limit-exceeded",
  description: "a transfer arrived without link credit",
});
