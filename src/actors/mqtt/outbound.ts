import type { IPublishPacket } from "mqtt-packet";
import type { OutboundPublish } from "../../protocol/natsToMqtt.js";
import type { OutboundRecord } from "./sessionStore.js";

/**
 * Where a stored delivery came from: the subscription (its filter; its consumer is renewed
 * on each resume) and the message's stream sequence.
 */
export interface StoredOrigin {
  readonly filter: string;
  readonly seq: number;
}

export interface SendOptions {
  /** The client took the message over: PUBACK (QoS 1) or PUBREC (QoS 2). A stored delivery is acknowledged to its stream then. */
  readonly onStored?: (() => void) | undefined;
  readonly origin?: StoredOrigin | undefined;
  /** A message the client had unacknowledged when its last connection ended: sent again with its packet id and DUP [MQTT-4.4.0-1]. */
  readonly pid?: number | undefined;
}

/**
 * The bytes held for the client (clientBytes.ts): the backlog counts in `waiting`, and a
 * message is written only while the socket's side is below the bound.
 */
export interface OutboundBytes {
  waiting: number;
  writable(): boolean;
  /** Bytes went: wake what waited for room. */
  settled(): void;
  /** Set to the flow whose backlog it pumps: the socket took everything it held. */
  onSocketDrain: { socketDrained(): void } | undefined;
}

/** Where a flow's packets go (the client's deliveries: an object, not two closures per connection). */
export interface OutboundSink {
  /** false: larger than the client allows, not sent (packetWriter.ts). */
  writeOutbound(packet: IPublishPacket): boolean;
  /** A message dropped from a full backlog (counted in mqgw_dropped_total). */
  droppedFromBacklog(packet: IPublishPacket): void;
}

/** Unbounded: for a flow that only counts messages. */
const unbounded = (): OutboundBytes => ({
  waiting: 0,
  writable: () => true,
  settled: () => {},
  onSocketDrain: undefined,
});

// Not the PUBLISH: its bytes are in the socket once written, and keeping the packet kept
// every payload in flight (256 of up to max_packet_size) until the client acknowledged it.
interface InFlight {
  /** QoS 2 after PUBREC (or a PUBREL owed since the last connection): only the PUBREL is owed. */
  released: boolean;
  readonly onStored: (() => void) | undefined;
  readonly origin: StoredOrigin | undefined;
}

interface Waiting {
  readonly packet: IPublishPacket;
  readonly options: SendOptions | undefined;
  readonly bytes: number;
}

/**
 * QoS 1/2 deliveries to one client: packet ids, the client's Receive Maximum, the backlog
 * waiting for a free slot (bounded; the oldest is dropped and counted), and what is still
 * in flight when the connection ends, for the session to hand back on the next one.
 */
export class OutboundFlow {
  /** Made on the first QoS 1/2 delivery: most clients never get one (docs/performance.md). */
  private inflight: Map<number, InFlight> | undefined;
  private backlog: Waiting[] | undefined;
  /** Packet ids of messages to be handed back with the id they had (not given to new ones). */
  private reserved: Map<number, StoredOrigin> | undefined;
  private nextId = 1;
  dropped = 0;

  constructor(
    private readonly receiveMaximum: number,
    private readonly maxBacklog: number,
    private readonly sink: OutboundSink,
    private readonly bytes: OutboundBytes = unbounded(),
  ) {
    bytes.onSocketDrain = this;
  }

  /** The socket took everything it held: the backlog may follow (OutboundBytes' `onSocketDrain`). */
  socketDrained(): void {
    this.pump();
  }

  private write(packet: IPublishPacket): boolean {
    return this.sink.writeOutbound(packet);
  }

  /**
   * false: the message is larger than the client allows and was dropped; a QoS 1/2 one
   * counts as delivered and taken over (`onStored` runs) [MQTT-3.1.2-25].
   */
  send(msg: OutboundPublish, options?: SendOptions): boolean {
    if (msg.qos === 0 && !msg.properties) {
      // Encoded straight from the NATS message's bytes (a Uint8Array is all the encoder needs).
      return this.write({
        cmd: "publish",
        topic: msg.topic,
        payload: msg.payload as Buffer,
        qos: 0,
        retain: msg.retain,
        dup: false,
      });
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
    // Behind what waits already, for a slot or for the socket to take what it holds.
    if (this.size() >= this.receiveMaximum || this.backlog?.length || !this.bytes.writable()) {
      const backlog = (this.backlog ??= []);
      if (backlog.length >= this.maxBacklog) {
        const oldest = backlog.shift()!;
        this.bytes.waiting -= oldest.bytes;
        this.dropped++;
        this.sink.droppedFromBacklog(oldest.packet);
      }
      packet.payload = unpinned(packet.payload);
      const bytes = packet.payload.byteLength + packet.topic.length;
      this.bytes.waiting += bytes;
      backlog.push({ packet, options, bytes });
      return true;
    }
    return this.dispatch(packet, options);
  }

  /** Sends what waits while slots are free and the socket's side is below the bound. */
  private pump(): void {
    const backlog = this.backlog;
    if (!backlog) return;
    const before = backlog.length;
    while (backlog.length > 0 && this.size() < this.receiveMaximum && this.bytes.writable()) {
      const next = backlog.shift()!;
      this.bytes.waiting -= next.bytes;
      // One too large for the client frees its slot at once: the loop takes the next.
      this.dispatch(next.packet, next.options);
    }
    if (backlog.length < before) this.bytes.settled();
  }

  /** The connection ended: what waited is let go (stored messages come again from their stream). */
  clear(): void {
    for (const w of this.backlog?.splice(0) ?? []) this.bytes.waiting -= w.bytes;
  }

  private dispatch(packet: IPublishPacket, options: SendOptions | undefined): boolean {
    const again =
      options?.pid !== undefined && this.reserved?.delete(options.pid) === true && !this.inflight?.has(options.pid);
    const id = again ? options!.pid! : this.allocateId();
    packet.messageId = id;
    if (again) packet.dup = true;
    if (!this.write(packet)) {
      options?.onStored?.();
      return false;
    }
    (this.inflight ??= new Map()).set(id, {
      released: false,
      onStored: options?.onStored,
      origin: options?.origin,
    });
    return true;
  }

  /** PUBACK (QoS 1) or PUBCOMP (QoS 2): the slot is free. */
  complete(id: number): boolean {
    const f = this.inflight?.get(id);
    if (!f) return false;
    this.inflight!.delete(id);
    if (!f.released) f.onStored?.();
    this.pump();
    return true;
  }

  /** PUBREC: the client has it (its stream may let go of it); answer PUBREL. */
  received(id: number): boolean {
    const f = this.inflight?.get(id);
    if (!f) return false;
    if (!f.released) {
      f.released = true;
      f.onStored?.();
    }
    return true;
  }

  size(): number {
    return this.inflight?.size ?? 0;
  }

  /**
   * Takes over what the session's last connection left in flight: QoS 2 deliveries waiting
   * for PUBREL (returned, for the connection to send their PUBRELs once CONNACK is out),
   * and the packet ids of unacknowledged stored deliveries, kept for when their stream
   * hands them back.
   */
  restore(record: OutboundRecord | undefined): number[] {
    for (const u of record?.unacked ?? []) (this.reserved ??= new Map()).set(u.pid, { filter: u.filter, seq: u.seq });
    const pubrel = record?.pubrel ?? [];
    for (const pid of pubrel)
      (this.inflight ??= new Map()).set(pid, {
        released: true,
        onStored: undefined,
        origin: undefined,
      });
    return [...pubrel];
  }

  /** The packet id a handed-back stored message had, if the last connection left it unacknowledged. */
  handedBack(origin: StoredOrigin): number | undefined {
    for (const [pid, o] of this.reserved ?? []) if (o.seq === origin.seq && o.filter === origin.filter) return pid;
    return undefined;
  }

  /** What is in flight now, as the session record keeps it (the connection is ending). */
  snapshot(): Pick<OutboundRecord, "unacked" | "pubrel"> {
    const unacked: Array<{ filter: string; seq: number; pid: number }> = [];
    const pubrel: number[] = [];
    for (const [pid, f] of this.inflight ?? []) {
      if (f.released) pubrel.push(pid);
      else if (f.origin) unacked.push({ filter: f.origin.filter, seq: f.origin.seq, pid });
    }
    // Handed back ids whose messages had not come again yet stay owed.
    for (const [pid, origin] of this.reserved ?? []) unacked.push({ filter: origin.filter, seq: origin.seq, pid });
    return { ...(unacked.length ? { unacked } : {}), ...(pubrel.length ? { pubrel } : {}) };
  }

  private allocateId(): number {
    for (let i = 0; i < 65535; i++) {
      const id = this.nextId;
      this.nextId = this.nextId === 65535 ? 1 : this.nextId + 1;
      if (!this.inflight?.has(id) && !this.reserved?.has(id)) return id;
    }
    throw new Error("no free packet id");
  }
}

/**
 * A payload that is a small view of a larger buffer (nats.js hands out views of its read
 * buffers) is copied before it waits, so what waits is what is counted.
 */
function unpinned(payload: Buffer | string): Buffer {
  if (typeof payload === "string") return Buffer.from(payload);
  return payload.byteLength * 2 < payload.buffer.byteLength ? Buffer.from(payload) : payload;
}
