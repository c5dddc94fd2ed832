import type { Msg } from "@nats-io/transport-node";
import type { IPublishPacket, Packet } from "mqtt-packet";
import { storedDeliverable } from "../../protocol/deliveryGuard.js";
import { LastMeta } from "../../protocol/headers.js";
import { natsToMqttPublish, type OutboundPublish, type SubscriptionOptions } from "../../protocol/natsToMqtt.js";
import { headerPairsOf } from "../client/headerPairs.js";
import { ReadPermission } from "../client/readPermission.js";
import { traceMqttDelivery } from "../tracing/hops.js";
import type { Hop } from "../tracing/tracing.js";
import type { ClientLink } from "./link.js";
import { OutboundFlow, type OutboundSink } from "./outbound.js";
import { type OverlapMember, Overlaps } from "./overlaps.js";
import type { RetainedMessages } from "./retained.js";
import type { OutboundRecord } from "./sessionStore.js";
import type { StoredDelivery } from "./storedDelivery.js";
import { type ActiveSubscription, closeSubscription, openSubscription } from "./subscriptions.js";

/**
 * What of a session reaches its client: core NATS messages, stored deliveries and retained
 * messages, mapped to PUBLISHes and checked (the subscription's subjects, what NATS lets the
 * client read), through the Receive Maximum (outbound.ts). Nothing goes out before CONNACK:
 * deliveries wait until the connection says it is served, behind the PUBRELs owed from the
 * session's previous connection [MQTT-4.4.0-1].
 */
export class Deliveries implements OutboundSink {
  readonly outbound: OutboundFlow;
  /** Which copy of a message matching several subscriptions is sent. */
  private readonly overlaps: Overlaps;
  /** Deliveries that arrive before CONNACK is out wait here; undefined once the client is served. */
  private held: Array<() => void> | undefined = [];
  /** Their payloads' bytes, counted in what the gateway holds for the client (clientBytes.ts). */
  private heldBytes = 0;
  /** PUBRELs owed since the last connection, sent once CONNACK is out. */
  private pubrel: number[] = [];
  private permission: ReadPermission | undefined;
  /** The metadata of the last header pairs delivered (a publisher's messages repeat them); made at the first delivery, as an idle client needs none. */
  private lastMeta: LastMeta | undefined;

  constructor(
    private readonly link: ClientLink,
    private readonly retained: RetainedMessages,
    receiveMaximum: number,
  ) {
    this.overlaps = new Overlaps(link.clientId);
    // A stored message dropped from the backlog is not acknowledged: the stream sends it again after ack_wait.
    this.outbound = new OutboundFlow(receiveMaximum, 1000, this, link.bytes);
  }

  /** (OutboundSink) */
  writeOutbound(p: IPublishPacket): boolean {
    return this.link.write(p as Packet);
  }

  /** (OutboundSink) */
  droppedFromBacklog(): void {
    this.link.metrics.dropped("mqtt", "backlog_full");
  }

  /** Takes over what the session's last connection left in flight (its record). */
  restore(record: OutboundRecord | undefined): void {
    this.pubrel = this.outbound.restore(record);
  }

  /** CONNACK is out: the PUBRELs owed first, then what waited for it, then everything from now on. */
  release(): void {
    for (const messageId of this.pubrel.splice(0)) this.link.write({ cmd: "pubrel", messageId } as Packet);
    const held = this.held ?? [];
    this.held = undefined;
    this.link.bytes.waiting -= this.heldBytes;
    this.heldBytes = 0;
    for (const deliver of held) deliver();
  }

  /** Opens a subscription's core NATS side; `viaConsumer`: the messages its consumer delivers instead. */
  listen(plan: Omit<ActiveSubscription, "nats">, viaConsumer: OverlapMember["viaConsumer"]): ActiveSubscription {
    const sub = openSubscription(
      this.link.lease.nats,
      plan,
      (s, subject, headers, data, reply, options) => this.deliver(s, subject, headers, data, reply, false, options),
      // The copies its consumer delivers are dropped before any header is read (most of
      // what such a subscription hears), and so are those another subscription sends.
      (s, m) => this.overlaps.core(s, m),
    );
    this.overlaps.add({ sub, viaConsumer });
    return sub;
  }

  /** Its NATS subscriptions close (those it alone held stay `lingerMs` for a resume), and it counts no more for overlapping ones. */
  unlisten(sub: ActiveSubscription, lingerMs = 0): void {
    closeSubscription(sub, lingerMs);
    this.overlaps.remove(sub);
  }

  /** Its consumer reads: overlapping subscriptions leave the messages it delivers to it. */
  consumerReading(sub: ActiveSubscription): void {
    this.overlaps.consumerReading(sub);
  }

  /** NATS may have changed what the client may read: ask again. */
  forgetPermissions(): void {
    this.permission = undefined;
  }

  deliver(
    sub: ActiveSubscription,
    subject: string,
    headers: Iterable<[string, string]> | undefined,
    data: Uint8Array,
    reply: string | undefined,
    retained = false,
    options: SubscriptionOptions = sub.options,
  ): void {
    if (this.held) {
      // Live messages past the bound are dropped as they would be once served.
      if (this.link.bytes.full()) return this.link.metrics.dropped("mqtt", "slow_consumer");
      this.hold(data.byteLength, () => this.deliver(sub, subject, headers, data, reply, retained, options));
      return;
    }
    const { link } = this;
    const out = natsToMqttPublish(
      subject,
      headers,
      data,
      reply,
      options,
      { protocolVersion: link.version, clientId: link.clientId, now: Date.now() },
      retained,
      (this.lastMeta ??= new LastMeta()).read,
    );
    if (typeof out === "string") {
      if (out === "expired") link.metrics.dropped("mqtt", "expired");
      return;
    }
    if (out.lost) link.metrics.propertiesLost("mqtt", out.lost);
    if (link.settings.tracing) traceMqttDelivery(link.settings.tracing, out, headers, this.hop(out, subject, data));
    if (link.bytes.full()) {
      // A slow consumer loses live messages (QoS 0, and QoS 1/2 no stream keeps), not the
      // gateway's memory (docs/decisions/backpressure.md).
      link.metrics.dropped("mqtt", "slow_consumer");
      return;
    }
    // One larger than the client allows is dropped and counted by the connection's writer.
    if (this.outbound.send(out)) link.metrics.messageOut("mqtt", "delivered");
  }

  /** A message of the subscription's consumer; `prefix` is what its stream puts before the subject (the MQTT store's `$MQG.msgs.`). */
  deliverStored(
    sub: ActiveSubscription,
    prefix: string,
    m: Msg,
    seq: number,
    d: StoredDelivery,
    checked = false,
  ): void {
    if (this.held) {
      this.hold(m.data.byteLength, () => this.deliverStored(sub, prefix, m, seq, d, checked));
      return;
    }
    const subject = prefix ? m.subject.slice(prefix.length) : m.subject;
    if (!checked && (!m.subject.startsWith(prefix) || !storedDeliverable(sub.subjects, subject))) {
      d.ack(seq); // not on this subscription's subjects: never the client's
      return;
    }
    const may = checked || this.mayRead(sub, subject);
    if (may !== true) {
      // Denied: consumed for this client, which may not read it. Unknown (NATS away): left for redelivery.
      void may.then((yes) =>
        yes === true ? this.deliverStored(sub, prefix, m, seq, d, true) : yes === false ? d.ack(seq) : undefined,
      );
      return;
    }
    const headers = headerPairsOf(m);
    if (!isQos12(headers)) {
      d.ack(seq); // without Mqgw-QoS 1/2 it reaches the client from core NATS, live only
      return;
    }
    const options = this.overlaps.stored(sub, m, subject);
    if (options === undefined) {
      d.ack(seq); // an older overlapping subscription's consumer sends it, for this one too
      return;
    }
    const out = natsToMqttPublish(subject, headers, m.data, undefined, options, {
      protocolVersion: this.link.version,
      clientId: this.link.clientId,
      now: Date.now(),
    });
    if (typeof out === "string") {
      d.ack(seq);
      return;
    }
    if (out.lost) this.link.metrics.propertiesLost("mqtt", out.lost);
    const tracing = this.link.settings.tracing;
    if (tracing) traceMqttDelivery(tracing, out, headers, this.hop(out, subject, m.data));
    const origin = { filter: sub.filter, seq };
    // Too large for the client: dropped, and acknowledged as if delivered [MQTT-3.1.2-25].
    if (this.outbound.send(out, { onStored: () => d.ack(seq), origin, pid: this.outbound.handedBack(origin) }))
      this.link.metrics.messageOut("mqtt", "delivered_stored");
  }

  private hop(out: OutboundPublish, subject: string, data: Uint8Array): Hop {
    const { clientId } = this.link;
    return { protocol: "mqtt", clientId, destination: out.topic, subject, qos: out.qos, size: data.byteLength };
  }

  private hold(bytes: number, deliver: () => void): void {
    this.heldBytes += bytes;
    this.link.bytes.waiting += bytes;
    this.held!.push(deliver);
  }

  /**
   * The retained messages of the subscriptions one SUBSCRIBE made, in its order: read in one
   * request for all of them (a device subscribing to its own topic and a fleet's is one
   * read, not two), each message to every subscription it matches.
   */
  async sendRetained(subs: readonly ActiveSubscription[]): Promise<void> {
    const subjects = [...new Set(subs.flatMap((s) => s.subjects))];
    const found = await this.retained.matching(this.link.account, subjects).catch(() => []);
    for (const sub of subs) {
      for (const r of found) {
        if (!storedDeliverable(sub.subjects, r.subject)) continue;
        const may = this.mayRead(sub, r.subject);
        if (may === true || (await may) === true) this.deliver(sub, r.subject, r.headers, r.data, undefined, true);
      }
    }
  }

  private mayRead(sub: ActiveSubscription, subject: string): true | Promise<boolean | undefined> {
    this.permission ??= new ReadPermission(this.link.lease.nats, this.link.denied.subscribe);
    return this.permission.mayRead(sub.subjects, subject);
  }
}

function isQos12(headers: Iterable<[string, string]> | undefined): boolean {
  if (!headers) return false;
  for (const [k, v] of headers) if (k.toLowerCase() === "mqgw-qos") return v === "1" || v === "2";
  return false;
}
