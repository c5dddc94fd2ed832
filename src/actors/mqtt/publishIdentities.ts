import { createHash } from "node:crypto";
import { newPublishId } from "../publishId.js";
import type { InboundState } from "./inboundState.js";

/** Acknowledged publishes whose ids a connection keeps for a resend that crossed its PUBACK. */
const RECENT = 64;

/**
 * The Nats-Msg-Id of each QoS 1/2 publish of one connection (docs/decisions/publish-identity.md):
 * a resend (DUP) of a packet id the session still holds unacknowledged gets the id its
 * first copy had, so a stream keeps it once; anything else is a new message with a new id.
 */
export class PublishIdentities {
  // Made on first use: an idle client needs neither (docs/performance.md).
  /** Packet ids of QoS 1/2 publishes this connection is passing on now (a resend of one waits for its answer). */
  private handling: Set<number> | undefined;
  /**
   * The ids of the last publishes this connection acknowledged, by packet id (at most
   * RECENT): a 3.1.1 client that resends on a timer while the PUBACK is on its way sends
   * DUP=1 for a packet id the session no longer holds; it is the same message.
   */
  private recent: Map<number, string> | undefined;

  constructor(private readonly state: InboundState) {}

  /** A publish of this packet id is being passed on now. */
  inFlight(messageId: number): boolean {
    return this.handling?.has(messageId) === true;
  }

  identify(messageId: number | undefined, dup: boolean): string {
    if (messageId === undefined) return newPublishId();
    const msgId =
      (dup ? (this.state.unacked.get(messageId) ?? this.recent?.get(messageId)) : undefined) ?? newPublishId();
    this.state.unacked.set(messageId, msgId);
    (this.handling ??= new Set()).add(messageId);
    return msgId;
  }

  /**
   * A QoS 2 publish of a session that outlives its connection: as `identify`, and also
   * a resend when DUP is 0 but the session holds this packet id as being stored with the
   * same topic and payload. A client may not reuse a QoS 2 packet id before PUBCOMP
   * [MQTT-2.3.1-2], so that is the message the gateway may have stored before it died,
   * sent again without DUP (paho-mqtt 1.6.1 does so for part of what it had in flight).
   */
  identifyQos2(messageId: number | undefined, dup: boolean, subject: string, payload: Uint8Array): string {
    if (messageId === undefined || !this.state.kept) return this.identify(messageId, dup);
    const digest = createHash("sha1").update(subject).update("\u0000").update(payload).digest("base64url");
    const again = !dup && this.state.storing.get(messageId) === digest;
    const msgId = this.identify(messageId, dup || again);
    this.state.storing.set(messageId, digest);
    return msgId;
  }

  /** Refused after it may have been stored: no longer passed on, but a resend after a reconnect keeps its id. */
  unsettled(messageId: number | undefined): void {
    this.handling?.delete(messageId ?? -1);
  }

  /** The exchange of this packet id is over: a later publish with it is a new message. */
  forget(messageId: number | undefined, msgId: string | undefined): void {
    if (messageId === undefined) return;
    this.handling?.delete(messageId);
    this.state.storing.delete(messageId);
    if (msgId !== undefined && this.state.unacked.get(messageId) === msgId) this.state.unacked.delete(messageId);
  }

  /** Acknowledged to the client: forgotten, and kept a little longer for a resend that crossed the answer. */
  acknowledged(messageId: number | undefined, msgId: string): void {
    this.forget(messageId, msgId);
    if (messageId === undefined) return;
    const recent = (this.recent ??= new Map());
    recent.delete(messageId);
    recent.set(messageId, msgId);
    if (recent.size > RECENT) recent.delete(recent.keys().next().value!);
  }
}
