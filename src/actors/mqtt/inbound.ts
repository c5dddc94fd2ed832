import * as crypto from "node:crypto";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Packet } from "mqtt-packet";
import { Reason } from "../../protocol/mqttReasons.js";
import { type InboundPublish, mqttPublishToNats, type PublishContext } from "../../protocol/mqttToNats.js";
import type { Bindings } from "../bindings.js";
import { toNatsHeaders } from "../client/natsHeaders.js";
import { flushAndSettle } from "../natsBridge.js";
import type { ClientLink } from "./link.js";
import type { RetainedMessages } from "./retained.js";
import type { InboundState } from "./inboundState.js";
import { StoredPublisher } from "./storedPublish.js";

const STORED_ACK_TIMEOUT_MS = 5_000;
/** QoS 0 bytes a client may publish before the gateway waits for NATS to take them (docs/decisions/backpressure.md). */
const QOS0_FLUSH_BYTES = 1024 * 1024;

/**
 * PUBLISH from the client to NATS: core publish acknowledged after the flush, or a
 * JetStream publish acknowledged after the stream's ack when a binding stores the
 * subject; refusals answered per the CONTRACT's error table.
 */
export class InboundPublisher {
  private pending = 0;
  // Made on first use: an idle client needs none of them (docs/performance.md).
  private qos2: Set<number> | undefined;
  private droppedLogged: Set<string> | undefined;
  private lastStoredId: Map<number, string> | undefined;
  /** QoS 0 bytes handed to NATS since the last flush, and whether a flush is under way. */
  private unflushed = 0;
  private flushing = false;
  /** Set by the connection: a publish settled, so a socket paused for backpressure may resume. */
  onSettled: (() => void) | undefined;

  constructor(
    private readonly link: ClientLink,
    private readonly bindings: Bindings,
    private readonly retained: RetainedMessages,
    /** The session's memory of the client's QoS 1/2 publishes (resends, QoS 2 exactly once). */
    readonly state: InboundState,
  ) {}

  onPublish(inbound: InboundPublish, messageId: number | undefined, dup: boolean): void {
    if (inbound.qos === 2 && messageId !== undefined && this.qos2?.has(messageId) === true) {
      // A resent QoS 2 publish already passed on: answer again, publish nothing [MQTT-4.3.3-9].
      this.link.write({ cmd: "pubrec", messageId } as Packet);
      return;
    }
    if (inbound.qos > 0 && ++this.pending > this.link.settings.receiveMaximum && this.link.version === 5) {
      return this.link.protocolError(Reason.receiveMaximumExceeded, "receive maximum exceeded");
    }
    // QoS 0 without RETAIN settles when handed to nats.js: no promise, no async frame.
    if (inbound.qos === 0 && !inbound.retain) return this.publishQos0(inbound);
    void this.publish(inbound, messageId, dup, false);
  }

  /**
   * Backpressure (docs/decisions/backpressure.md): true while a 3.1.1 client has as many
   * QoS 1/2 publishes waiting for NATS as the receive maximum (a v5 client is told the
   * limit and gets 0x93 past it), or a megabyte of QoS 0 waits for NATS's flush. The
   * connection stops reading the socket meanwhile.
   */
  busy(): boolean {
    return (this.link.version === 4 && this.pending >= this.link.settings.receiveMaximum) || this.flushing;
  }

  /** PUBREL: the QoS 2 exchange ends; true when the id was known. */
  release(messageId: number): boolean {
    return this.qos2?.delete(messageId) === true;
  }

  will(inbound: InboundPublish): Promise<void> {
    return this.publish(inbound, undefined, false, true);
  }

  /** The mapping's context, one per client: only `now` and `markClientId` change between messages. */
  private ctx: { -readonly [K in keyof PublishContext]: PublishContext[K] } | undefined;

  /** The NATS subject, reply and headers of a publish, or undefined when it was refused (and answered). */
  private map(inbound: InboundPublish, messageId: number | undefined, isWill: boolean): { subject: string; reply: string | undefined; pairs: Array<[string, string]> | undefined } | undefined {
    const { link } = this;
    if (tooManyLevels(inbound.topic, link.settings.maxTopicLevels)) {
      link.metrics.refused("mqtt", "too_many_levels");
      if (!isWill) this.refuse(inbound, messageId, Reason.topicNameInvalid, `topic has more than ${link.settings.maxTopicLevels} levels`);
      return undefined;
    }
    const ctx = (this.ctx ??= {
      protocolVersion: link.version,
      clientId: link.clientId,
      routes: link.settings.routes,
      routeList: link.settings.routeList,
      now: 0,
      markClientId: true,
    });
    ctx.now = Date.now();
    ctx.markClientId = link.settings.clientIdHeaderAlways || link.noLocal.count > 0;
    const mapped = mqttPublishToNats(inbound, ctx);
    if (!mapped.ok) {
      link.metrics.refused("mqtt", reasonLabel(mapped.error.reasonCode));
      if (!isWill) this.refuse(inbound, messageId, mapped.error.reasonCode, mapped.error.reason);
      return undefined;
    }
    const { subject, reply } = mapped.value;
    // Header pairs, made into MsgHdrs only where needed: a stored publish encodes them itself.
    return { subject, reply, pairs: mapped.value.headers };
  }

  /** `publish` for QoS 0 without RETAIN, synchronous: nothing waits for NATS (the same steps, in the same order). */
  private publishQos0(inbound: InboundPublish): void {
    const { link } = this;
    const mapped = this.map(inbound, undefined, false);
    if (!mapped) return;
    const { subject, reply } = mapped;
    const headers = mapped.pairs && toNatsHeaders(mapped.pairs);
    const nc = link.lease.nc;
    if (!link.lease.connected()) {
      this.dropOnce(inbound.topic, "NATS is unreachable", "nats_unavailable");
      return;
    }
    try {
      if (headers || reply) nc.publish(subject, inbound.payload, { ...(headers ? { headers } : {}), ...(reply ? { reply } : {}) });
      else nc.publish(subject, inbound.payload);
    } catch (e) {
      if (link.denied.publish.delete(subject)) return this.notAuthorized(inbound, undefined, subject, false);
      link.metrics.refused("mqtt", "nats_error");
      this.refuse(inbound, undefined, Reason.unspecified, `NATS: ${(e as Error).message}`);
      return;
    }
    link.metrics.messageIn("mqtt", "published");
    this.countUnflushed(nc, inbound.payload.byteLength);
  }

  private async publish(inbound: InboundPublish, messageId: number | undefined, dup: boolean, isWill: boolean): Promise<void> {
    const { link } = this;
    const mapped = this.map(inbound, messageId, isWill);
    if (!mapped) return;
    const { subject, reply, pairs } = mapped;
    const nc = link.lease.nc;
    if (inbound.qos === 0 && !isWill && !link.lease.connected()) {
      // nats.js would buffer it and discard it at the next reconnect attempt: drop it here, counted.
      this.dropOnce(inbound.topic, "NATS is unreachable", "nats_unavailable");
      return;
    }
    const stream = inbound.qos > 0 ? this.bindings.storedIn(link.account, subject) : undefined;
    const headers = pairs && (!stream || inbound.retain) ? toNatsHeaders(pairs) : undefined;
    try {
      if (stream) {
        await this.publishStored(nc, subject, inbound, messageId, dup, pairs);
      } else {
        nc.publish(subject, inbound.payload, { ...(headers ? { headers } : {}), ...(reply ? { reply } : {}) });
        link.metrics.messageIn("mqtt", "published");
        if (inbound.qos === 0 && !inbound.retain) return this.countUnflushed(nc, inbound.payload.byteLength);
        // The server answers a refused publish with -ERR before the flush's PONG.
        await flushAndSettle(nc);
      }
    } catch (e) {
      if (link.denied.publish.delete(subject)) return this.notAuthorized(inbound, messageId, subject, isWill);
      const reason = stream ? `stored publish not acknowledged by JetStream: ${(e as Error).message}` : `NATS: ${(e as Error).message}`;
      link.metrics.refused("mqtt", stream ? "jetstream_no_ack" : "nats_error");
      if (!isWill) this.refuse(inbound, messageId, Reason.unspecified, reason);
      return;
    }
    if (link.denied.publish.delete(subject)) return this.notAuthorized(inbound, messageId, subject, isWill);
    if (inbound.retain) {
      // Only after NATS took the client's own publish: the gateway never stores for a client what it may not send.
      await this.retained.store(link.account, subject, inbound.payload, headers).catch((e: Error) => {
        link.log.warn({ subject, err: e.message }, "could not store a retained message");
      });
    }
    if (!isWill) this.ack(inbound.qos, messageId);
  }

  private async publishStored(
    nc: NatsConnection,
    subject: string,
    inbound: InboundPublish,
    messageId: number | undefined,
    dup: boolean,
    headers: Array<[string, string]> | undefined,
  ): Promise<void> {
    const started = performance.now();
    // A raw publish with its reply on one shared inbox, not js.publish (docs/performance.md).
    const msgId = this.storedMessageId(subject, inbound.payload, messageId, dup);
    const ack = await StoredPublisher.of(nc).publish(subject, inbound.payload, headers, msgId, STORED_ACK_TIMEOUT_MS);
    this.link.metrics.jsAckLatency.observe((performance.now() - started) / 1000);
    this.link.metrics.messageIn("mqtt", ack.duplicate ? "stored_duplicate" : "stored");
  }

  /**
   * A resend (same packet id, same message) must get the same Nats-Msg-Id so the stream
   * keeps one copy; a new message that reuses a packet id must not.
   */
  private storedMessageId(subject: string, payload: Uint8Array, messageId: number | undefined, dup: boolean): string {
    const digest = contentDigest(subject, payload);
    const base = `${this.link.clientId}:${messageId ?? 0}:${digest}`;
    const id = messageId ?? 0;
    const lastIds = (this.lastStoredId ??= new Map());
    const last = lastIds.get(id);
    let msgId = base;
    if (!dup && last !== undefined && last.startsWith(base)) {
      const n = Number(last.slice(base.length + 1) || "0") + 1;
      msgId = `${base}:${n}`;
    } else if (dup && last?.startsWith(base)) {
      msgId = last;
    }
    lastIds.set(id, msgId);
    return msgId;
  }

  /** Every megabyte of QoS 0, wait for NATS to have taken it before reading more (backpressure). */
  private countUnflushed(nc: NatsConnection, bytes: number): void {
    this.unflushed += bytes;
    if (this.flushing || this.unflushed < QOS0_FLUSH_BYTES) return;
    this.flushing = true;
    this.unflushed = 0;
    void nc
      .flush()
      .catch(() => {})
      .then(() => {
        this.flushing = false;
        this.onSettled?.();
      });
  }

  private ack(qos: 0 | 1 | 2, messageId: number | undefined): void {
    if (qos === 0) return;
    this.pending--;
    this.onSettled?.();
    if (qos === 1) this.link.write({ cmd: "puback", messageId } as Packet);
    else {
      (this.qos2 ??= new Set()).add(messageId ?? 0);
      this.link.write({ cmd: "pubrec", messageId } as Packet);
    }
  }

  private notAuthorized(inbound: InboundPublish, messageId: number | undefined, subject: string, isWill: boolean): void {
    this.link.metrics.refused("mqtt", "not_authorized");
    if (!isWill) this.refuse(inbound, messageId, Reason.notAuthorized, `not authorized to publish to ${subject}`);
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
    this.pending--;
    this.onSettled?.();
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

/** limits.max_topic_levels: a deep topic costs every subscription match on the server. */
export function tooManyLevels(topic: string, max: number): boolean {
  if (max <= 0) return false;
  let levels = 1;
  for (let i = 0; i < topic.length; i++) if (topic.charCodeAt(i) === 47 && ++levels > max) return true;
  return false;
}

/**
 * sha256(subject, NUL, payload) in base64url, 22 characters. The one-shot `crypto.hash`
 * (Node 20.12+) skips the Hash object, about 0.6 µs per stored publish; same bytes.
 */
function contentDigest(subject: string, payload: Uint8Array): string {
  if (typeof crypto.hash === "function") {
    return crypto.hash("sha256", Buffer.concat([Buffer.from(`${subject}\u0000`), payload]), "base64url").slice(0, 22);
  }
  return crypto.createHash("sha256").update(subject).update("\u0000").update(payload).digest("base64url").slice(0, 22);
}

export function reasonLabel(code: number): string {
  switch (code) {
    case Reason.topicNameInvalid:
    case Reason.topicFilterInvalid:
      return "bad_topic";
    case Reason.notAuthorized:
      return "not_authorized";
    case Reason.implementationSpecific:
      return "route_property_missing";
    case Reason.payloadFormatInvalid:
      return "payload_format_invalid";
    default:
      return `reason_0x${code.toString(16)}`;
  }
}
