import type { IPublishPacket } from "mqtt-packet";
import type { OutboundPublish } from "../../protocol/natsToMqtt.js";

interface InFlight {
  packet: IPublishPacket;
  /** QoS 2 after PUBREC: only the PUBREL is owed. */
  released: boolean;
  onAcked?: (() => void) | undefined;
}

/**
 * QoS 1/2 deliveries to one client: packet ids, the client's Receive Maximum, and the
 * backlog waiting for a free slot (bounded; the oldest is dropped and counted).
 */
export class OutboundFlow {
  /** Made on the first QoS 1/2 delivery: most clients never get one (docs/performance.md). */
  private inflight: Map<number, InFlight> | undefined;
  private backlog: Array<{ packet: IPublishPacket; onAcked?: (() => void) | undefined }> | undefined;
  private nextId = 1;
  dropped = 0;

  constructor(
    private readonly receiveMaximum: number,
    private readonly maxBacklog: number,
    /** false: larger than the client allows, not sent (packetWriter.ts). */
    private readonly write: (packet: IPublishPacket) => boolean,
    /** A message dropped from a full backlog (counted in mqgw_dropped_total). */
    private readonly onDrop: (packet: IPublishPacket) => void = () => {},
  ) {}

  /**
   * false: the message is larger than the client allows and was dropped; a QoS 1/2 one
   * counts as delivered and acknowledged (`onAcked` runs) [MQTT-3.1.2-25].
   */
  send(msg: OutboundPublish, onAcked?: () => void): boolean {
    if (msg.qos === 0 && !msg.properties) {
      // Encoded straight from the NATS message's bytes (a Uint8Array is all the encoder needs).
      return this.write({ cmd: "publish", topic: msg.topic, payload: msg.payload as Buffer, qos: 0, retain: msg.retain, dup: false });
    }
    const packet: IPublishPacket = {
      cmd: "publish",
      topic: msg.topic,
      payload: msg.payload as Buffer,
      qos: msg.qos,
      retain: msg.retain,
      dup: false,
      // Ours, User Properties as a list in order: the writer encodes them (mqttProperties.ts).
      ...(msg.properties ? { properties: msg.properties as IPublishPacket["properties"] } : {}),
    };
    if (msg.qos === 0) return this.write(packet);
    if (this.size() >= this.receiveMaximum) {
      const backlog = (this.backlog ??= []);
      if (backlog.length >= this.maxBacklog) {
        const oldest = backlog.shift()!;
        this.dropped++;
        this.onDrop(oldest.packet);
      }
      backlog.push({ packet, onAcked });
      return true;
    }
    return this.dispatch(packet, onAcked);
  }

  private dispatch(packet: IPublishPacket, onAcked?: () => void): boolean {
    const id = this.allocateId();
    packet.messageId = id;
    if (!this.write(packet)) {
      onAcked?.();
      return false;
    }
    (this.inflight ??= new Map()).set(id, { packet, released: false, onAcked });
    return true;
  }

  /** PUBACK (QoS 1) or PUBCOMP (QoS 2): the slot is free. */
  complete(id: number): boolean {
    const f = this.inflight?.get(id);
    if (!f) return false;
    this.inflight!.delete(id);
    f.onAcked?.();
    // A backlogged message too large for the client frees its slot at once: take the next.
    for (let next = this.backlog?.shift(); next; next = this.backlog?.shift()) if (this.dispatch(next.packet, next.onAcked)) break;
    return true;
  }

  /** PUBREC: the client has it; answer PUBREL. */
  received(id: number): boolean {
    const f = this.inflight?.get(id);
    if (!f) return false;
    f.released = true;
    return true;
  }

  size(): number {
    return this.inflight?.size ?? 0;
  }

  private allocateId(): number {
    for (let i = 0; i < 65535; i++) {
      const id = this.nextId;
      this.nextId = this.nextId === 65535 ? 1 : this.nextId + 1;
      if (!this.inflight?.has(id)) return id;
    }
    throw new Error("no free packet id");
  }
}
