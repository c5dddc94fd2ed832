import type { Packet } from "mqtt-packet";
import type { WillMessage } from "../../machines/mqttConnection.js";
import { Reason } from "../../protocol/mqttReasons.js";
import type { InboundPublish, PublishProperties } from "../../protocol/mqttToNats.js";
import type { Bindings } from "../bindings.js";
import { headerBlock, toNatsHeaders } from "../client/natsHeaders.js";
import type { NatsSeam } from "../client/natsSeam.js";
import { AckInboxDenied } from "../client/storedPublisher.js";
import { keepCopy, PublishOrder, STORED_ANSWER_MS, writeStored } from "../client/storedWrite.js";
import type { MessageStore } from "../messageStore.js";
import { tracedPublish } from "../tracing/hops.js";
import type { Hop } from "../tracing/tracing.js";
import type { InboundState } from "./inboundState.js";
import type { ClientLink } from "./link.js";
import { PublishIdentities } from "./publishIdentities.js";
import { type Mapped, PublishMapping } from "./publishMapping.js";
import { ReceiveQuota } from "./receiveQuota.js";
import type { RetainedMessages } from "./retained.js";

/** QoS 0 bytes a client may publish before the gateway waits for NATS to take them (docs/decisions/backpressure.md). */
const QOS0_FLUSH_BYTES = 1024 * 1024;
const NONE: ReadonlyArray<readonly [string, string]> = [];

/**
 * PUBLISH from the client to NATS: QoS 0 by core publish; QoS 1/2 into the bound stream
 * or, on an unbound subject, by core publish plus the MQTT store's copy, acknowledged
 * once all of it is done; refusals answered per the CONTRACT's error table.
 */
export class InboundPublisher {
  private pending = 0;
  /** MQTT 5: QoS 1/2 packet ids not yet completed (PUBACK, PUBREL, or a refusal) [MQTT-3.3.4-9]. */
  private readonly quota = new ReceiveQuota();
  // Made on first use: an idle client needs none (docs/performance.md).
  private droppedLogged: Set<string> | undefined;
  private readonly ids: PublishIdentities;
  /** Keeps stored publishes sent again in order per subject; made on first use. */
  private order: PublishOrder | undefined;
  private readonly mapping: PublishMapping;
  /** QoS 0 bytes handed to NATS since the last flush, and whether a flush is under way. */
  private unflushed = 0;
  private flushing = false;
  /** Past the Receive Maximum (or a 3.1.1 client over quota): the end on its way, once what was passed on is answered. */
  private ending: Promise<void> | undefined;
  private drained: (() => void) | undefined;
  /** Set by the connection: a publish settled, so a socket paused for backpressure may resume. */
  onSettled: (() => void) | undefined;

  constructor(
    private readonly link: ClientLink,
    private readonly bindings: Bindings,
    private readonly retained: RetainedMessages,
    /** The session's memory of the client's QoS 1/2 publishes (inboundState.ts): what makes a resend one. */
    readonly state: InboundState,
    /** The MQTT store: where QoS 1/2 publishes to unbound subjects are kept for sessions that are away. */
    private readonly store: MessageStore,
  ) {
    this.ids = new PublishIdentities(state);
    this.mapping = new PublishMapping(link);
  }

  onPublish(inbound: InboundPublish, messageId: number | undefined, dup: boolean): void {
    // Past the Receive Maximum or over quota at 3.1.1, nothing more is passed on: the client is being disconnected.
    if (this.ending) return;
    // [MQTT-3.2.2-11, -14]: DISCONNECT 0x9B / 0x9A (3.1.1: closed) past what the CONNACK allowed.
    const { maximumQos, retainAvailable } = this.link.settings;
    if (inbound.qos > maximumQos)
      return this.link.protocolError(Reason.qosNotSupported, `QoS ${inbound.qos} above Maximum QoS ${maximumQos}`);
    if (inbound.retain && !retainAvailable)
      return this.link.protocolError(Reason.retainNotSupported, "retained messages are not available");
    if (inbound.qos === 2 && messageId !== undefined && this.state.qos2.has(messageId)) {
      // A resent QoS 2 publish already passed on: answer again, publish nothing [MQTT-4.3.3-9].
      this.link.write({ cmd: "pubrec", messageId } as Packet);
      return;
    }
    if (inbound.qos > 0 && dup && messageId !== undefined && this.ids.inFlight(messageId)) {
      // A resend of a publish still being passed on (3.1.1 clients resend on a timer): its answer is on the way.
      return;
    }
    if (
      inbound.qos > 0 &&
      this.link.version === 5 &&
      !this.quota.take(messageId ?? 0, this.link.settings.receiveMaximum)
    ) {
      return this.endOnceAnswered(Reason.receiveMaximumExceeded, "receive maximum exceeded");
    }
    if (inbound.qos > 0) this.pending++;
    // After the resend checks (a resend is the message already counted), before any work.
    const over = this.link.quota.admit(inbound.payload.byteLength);
    if (over) return this.quotaExceeded(inbound, messageId, over);
    // QoS 0 without RETAIN settles when handed to nats.js: no promise, no async frame.
    if (inbound.qos === 0 && !inbound.retain) return this.publishQos0(inbound);
    // Not a task (actorTasks.ts): a fiber per message costs ~2.5 µs; every failure is answered inside.
    void this.publish(inbound, messageId, dup, false);
  }

  /**
   * Over limits.per_client or limits.per_account (docs/decisions/quotas.md), never passed
   * on: QoS 0 dropped and counted; QoS 1/2 PUBACK/PUBREC 0x97, which 3.1.1 cannot say (closed).
   */
  private quotaExceeded(inbound: InboundPublish, messageId: number | undefined, why: string): void {
    if (inbound.qos === 0) return this.dropOnce(inbound.topic, why, "quota_exceeded");
    this.link.metrics.refused("mqtt", "quota_exceeded");
    if (this.link.version === 5) return this.refuse(inbound, messageId, Reason.quotaExceeded, why);
    this.settle();
    this.endOnceAnswered(Reason.quotaExceeded, why);
  }

  /**
   * Backpressure (docs/decisions/backpressure.md): true while a 3.1.1 client has as many
   * QoS 1/2 publishes waiting for NATS as the receive maximum (a v5 client is told the
   * limit and gets 0x93 past it), or a megabyte of QoS 0 waits for NATS's flush. The
   * connection stops reading the socket meanwhile.
   */
  busy(): boolean {
    return (
      (this.link.version === 4 && this.pending >= this.link.settings.receiveMaximum) ||
      this.flushing ||
      this.ending !== undefined
    );
  }

  /**
   * [MQTT-3.3.4-9] DISCONNECT 0x93 (or a 3.1.1 client's close over quota), but only once
   * every publish already passed on is answered: a PUBACK lost to the close would have the
   * client send it again after its reconnect. Bounded: a publish NATS never answers does
   * not keep the client.
   */
  private endOnceAnswered(reasonCode: number, reason: string): void {
    const settled = new Promise<void>((resolve) => {
      this.drained = resolve;
      if (this.pending === 0) resolve();
      setTimeout(resolve, STORED_ANSWER_MS + 1_000).unref();
    });
    this.ending = settled.then(() => this.link.protocolError(reasonCode, reason));
    this.onSettled?.();
  }

  /** A QoS 1/2 publish was answered (acknowledged or refused). */
  private settle(): void {
    this.pending--;
    this.onSettled?.();
    if (this.pending === 0) this.drained?.();
  }

  /**
   * PUBREL: the QoS 2 exchange ends; true when the id was known. Forgotten in the session
   * record before PUBCOMP, so a PUBLISH that reuses the id afterwards is a new message.
   */
  async release(messageId: number): Promise<boolean> {
    this.quota.complete(messageId);
    if (!this.state.qos2.delete(messageId)) return false;
    await this.state
      .save()
      .catch((e: Error) => this.link.log.warn({ err: e.message }, "could not save the session after PUBREL"));
    return true;
  }

  /** The will of the connection's CONNECT, published as the client's own message (NATS authorizes it). */
  will(will: WillMessage): Promise<void> {
    const { topic, qos, retain } = will;
    const properties = will.properties as PublishProperties | undefined;
    return this.publish({ topic, payload: Buffer.from(will.payload), qos, retain, properties }, undefined, false, true);
  }

  /** The NATS subject, reply and headers of a publish, or undefined when it was refused (and answered, unless a will). */
  private map(inbound: InboundPublish, messageId: number | undefined, isWill: boolean): Mapped | undefined {
    const mapped = this.mapping.map(inbound);
    const tracing = this.link.settings.tracing;
    if (!("reasonCode" in mapped))
      return tracing === undefined ? mapped : tracedPublish(tracing, mapped, this.hop(inbound, mapped));
    if (!isWill) this.refuse(inbound, messageId, mapped.reasonCode, mapped.reason);
    return undefined;
  }

  private hop(inbound: InboundPublish, mapped: Mapped): Hop {
    const { clientId } = this.link;
    const { topic: destination, qos, payload } = inbound;
    return { protocol: "mqtt", clientId, destination, subject: mapped.subject, qos, size: payload.byteLength };
  }

  /** `publish` for QoS 0 without RETAIN, synchronous: nothing waits for NATS (the same steps, in the same order). */
  private publishQos0(inbound: InboundPublish): void {
    const { link } = this;
    const mapped = this.map(inbound, undefined, false);
    if (!mapped) return;
    const { subject, reply, pairs } = mapped;
    const nats = link.lease.nats;
    if (!link.lease.connected()) {
      this.dropOnce(inbound.topic, "NATS is unreachable", "nats_unavailable");
      return;
    }
    try {
      // A bare publish's headers are the same every time: encoded once (mqttToNats.ts, bareHeaders).
      const bareOptions = this.mapping.bareOptionsFor(pairs);
      if (bareOptions) nats.publish(subject, inbound.payload, bareOptions);
      else if (pairs || reply)
        nats.publish(subject, inbound.payload, {
          ...(pairs ? { headers: toNatsHeaders(pairs) } : {}),
          ...(reply ? { reply } : {}),
        });
      else nats.publish(subject, inbound.payload);
    } catch (e) {
      if (link.denied.publish.delete(subject)) return this.notAuthorized(inbound, undefined, subject, false);
      link.metrics.refused("mqtt", "nats_error");
      this.refuse(inbound, undefined, Reason.unspecified, `NATS: ${(e as Error).message}`);
      return;
    }
    link.metrics.messageIn("mqtt", "published");
    this.countUnflushed(nats, inbound.payload.byteLength);
  }

  /**
   * Where a publish goes (docs/decisions/mqtt-store.md): QoS 0 to core NATS; QoS 1/2 to a
   * subject a binding stores by the client's JetStream publish into that stream; any other
   * QoS 1/2 by the client's core publish, then the gateway's copy in the MQTT store.
   * Acknowledged only after every step.
   */
  private async publish(
    inbound: InboundPublish,
    messageId: number | undefined,
    dup: boolean,
    isWill: boolean,
  ): Promise<void> {
    const { link } = this;
    const mapped = this.map(inbound, messageId, isWill);
    if (!mapped) return;
    const { subject, reply, pairs } = mapped;
    const nats = link.lease.nats;
    if (inbound.qos === 0) {
      if (!isWill && !link.lease.connected()) {
        // nats.js would buffer it and discard it at the next reconnect attempt: drop it here, counted.
        this.dropOnce(inbound.topic, "NATS is unreachable", "nats_unavailable");
        return;
      }
      return this.publishCore(inbound, subject, reply, pairs, isWill);
    }
    const msgId =
      inbound.qos === 2 && !isWill
        ? this.ids.identifyQos2(messageId, dup, subject, inbound.payload)
        : this.ids.identify(messageId, dup);
    // [MQTT-4.3.3-9] across a crash of this process: the id is in the session record before
    // the message can be stored, so the client's DUP resend to the next gateway gets it
    // again and the stream keeps one copy (docs/decisions/publish-identity.md).
    if (inbound.qos === 2 && !isWill && !(await this.state.save())) {
      // Not in the record: a copy stored now could not be known after a crash. Refused
      // unstored (3.1.1: the connection closes), so the client's resend is the first copy.
      this.ids.forget(messageId, msgId);
      link.metrics.refused("mqtt", "jetstream_no_ack");
      return this.refuse(inbound, messageId, Reason.unspecified, "the session could not be saved before storing");
    }
    const stream = this.bindings.storedIn(link.account, subject);
    // One header block, Nats-Msg-Id included, for the client's publish and the store's copy.
    const h = headerBlock(pairs ?? NONE, msgId);
    let step: "client" | "store" = "client";
    this.order ??= new PublishOrder();
    const order = this.order;
    // A publish on this subject is being sent again: this one goes after it (client/storedWrite.ts).
    for (let held = order.heldBy(subject); held; held = order.heldBy(subject)) await held;
    const turn = order.take(subject);
    const started = performance.now();
    try {
      if (stream) {
        // A raw publish with its reply on one shared inbox, not js.publish (docs/performance.md).
        // Sent again while the stream does not answer, up to STORED_ANSWER_MS (client/storedWrite.ts).
        const ack = await writeStored(nats, link.metrics, subject, inbound.payload, h, turn);
        link.metrics.messageIn("mqtt", ack.duplicate ? "stored_duplicate" : "stored");
      } else {
        nats.publish(subject, inbound.payload, { headers: h, ...(reply ? { reply } : {}) });
        // The server answers a refused publish with -ERR before the flush's PONG; a refused one is not kept.
        await nats.confirm();
        if (link.denied.publish.delete(subject)) return this.notAuthorized(inbound, messageId, subject, isWill, msgId);
        step = "store";
        const kept = await keepCopy(this.store, link.metrics, link.account, subject, inbound.payload, h, turn, started);
        link.metrics.messageIn(
          "mqtt",
          kept === "duplicate" ? "stored_duplicate" : kept === "stored" ? "stored" : "published",
        );
      }
    } catch (e) {
      if (step === "client" && link.denied.publish.delete(subject))
        return this.notAuthorized(inbound, messageId, subject, isWill, msgId);
      if (e instanceof AckInboxDenied && step === "client")
        return this.notAuthorized(inbound, messageId, subject, isWill, msgId, e.message);
      const reason =
        step === "store"
          ? `not kept by the MQTT store: ${(e as Error).message}`
          : stream
            ? `stored publish not acknowledged by JetStream: ${(e as Error).message}`
            : `NATS: ${(e as Error).message}`;
      link.metrics.refused("mqtt", stream || step === "store" ? "jetstream_no_ack" : "nats_error");
      if (stream || step === "store") link.metrics.jetstreamError("mqtt", "publish");
      // It may be stored all the same: a resend after a reconnect keeps its id (and is stored once).
      this.ids.unsettled(messageId);
      if (!isWill) this.refuse(inbound, messageId, Reason.unspecified, reason);
      return;
    } finally {
      turn.done();
    }
    if (stream && link.denied.publish.delete(subject))
      return this.notAuthorized(inbound, messageId, subject, isWill, msgId);
    if (inbound.retain) await this.storeRetained(subject, inbound.payload, pairs);
    if (!isWill) await this.ack(inbound.qos, messageId, msgId);
  }

  /** QoS 0 with RETAIN, and QoS 0 wills: a core publish, flushed when retained (the retained copy waits for NATS's verdict). */
  private async publishCore(
    inbound: InboundPublish,
    subject: string,
    reply: string | undefined,
    pairs: Array<[string, string]> | undefined,
    isWill: boolean,
  ): Promise<void> {
    const { link } = this;
    const nats = link.lease.nats;
    try {
      nats.publish(subject, inbound.payload, {
        ...(pairs ? { headers: toNatsHeaders(pairs) } : {}),
        ...(reply ? { reply } : {}),
      });
      link.metrics.messageIn("mqtt", "published");
      if (!inbound.retain) return this.countUnflushed(nats, inbound.payload.byteLength);
      await nats.confirm();
    } catch (e) {
      if (link.denied.publish.delete(subject)) return this.notAuthorized(inbound, undefined, subject, isWill);
      link.metrics.refused("mqtt", "nats_error");
      if (!isWill) this.refuse(inbound, undefined, Reason.unspecified, `NATS: ${(e as Error).message}`);
      return;
    }
    if (link.denied.publish.delete(subject)) return this.notAuthorized(inbound, undefined, subject, isWill);
    await this.storeRetained(subject, inbound.payload, pairs);
  }

  /** Only after NATS took the client's own publish: the gateway never stores for a client what it may not send. */
  private async storeRetained(
    subject: string,
    payload: Uint8Array,
    pairs: Array<[string, string]> | undefined,
  ): Promise<void> {
    await this.retained.store(this.link.account, subject, payload, pairs && toNatsHeaders(pairs)).catch((e: Error) => {
      this.link.log.warn({ subject, err: e.message }, "could not store a retained message");
    });
  }

  /** Every megabyte of QoS 0, wait for NATS to have taken it before reading more (backpressure). */
  private countUnflushed(nats: NatsSeam, bytes: number): void {
    this.unflushed += bytes;
    if (this.flushing || this.unflushed < QOS0_FLUSH_BYTES) return;
    this.flushing = true;
    this.unflushed = 0;
    void nats
      .taken()
      .catch(() => {})
      .then(() => {
        this.flushing = false;
        this.onSettled?.();
      });
  }

  private async ack(qos: 1 | 2, messageId: number | undefined, msgId: string): Promise<void> {
    this.ids.acknowledged(messageId, msgId);
    if (qos === 2) {
      // [MQTT-4.3.3-9] Remembered in the session before PUBREC: a resend after a reconnect, here
      // or on another gateway, is answered without being passed on again.
      this.state.qos2.set(messageId ?? 0, msgId);
      await this.state
        .save()
        .catch((e: Error) => this.link.log.warn({ err: e.message }, "could not save the session before PUBREC"));
    }
    this.settle();
    if (qos === 1) this.quota.complete(messageId ?? 0);
    this.link.write({ cmd: qos === 1 ? "puback" : "pubrec", messageId } as Packet);
  }

  private notAuthorized(
    inbound: InboundPublish,
    messageId: number | undefined,
    subject: string,
    isWill: boolean,
    msgId?: string,
    why?: string,
  ): void {
    this.link.metrics.refused("mqtt", "not_authorized");
    this.ids.forget(messageId, msgId);
    if (!isWill)
      this.refuse(inbound, messageId, Reason.notAuthorized, why ?? `not authorized to publish to ${subject}`);
  }

  /** The CONTRACT's error table, by QoS and protocol version. */
  private refuse(inbound: InboundPublish, messageId: number | undefined, reasonCode: number, reason: string): void {
    const { link } = this;
    const badTopic = reasonCode === Reason.topicNameInvalid || reasonCode === Reason.topicAliasInvalid;
    if (inbound.qos === 0) {
      this.dropOnce(inbound.topic, reason);
      // A bad topic is a protocol error even at QoS 0 (v5 DISCONNECT 0x90; 3.1.1 close).
      if (badTopic) link.protocolError(reasonCode, reason);
      return;
    }
    this.settle();
    this.quota.complete(messageId ?? 0); // a PUBACK or PUBREC of 0x80 or more ends the exchange
    // 3.1.1 has no negative acknowledgement: closing is the only honest answer.
    if (link.version === 4) return link.protocolError(reasonCode, reason);
    const cmd = inbound.qos === 1 ? "puback" : "pubrec";
    link.write({ cmd, messageId, reasonCode, properties: { reasonString: reason } } as Packet);
  }

  private dropOnce(topic: string, reason: string, label = "refused_qos0"): void {
    this.link.metrics.dropped("mqtt", label);
    const logged = (this.droppedLogged ??= new Set());
    if (logged.size < 100 && !logged.has(topic)) {
      logged.add(topic);
      this.link.log.info({ client_id: this.link.clientId, topic, reason }, "QoS 0 publish dropped");
    }
  }
}
