import { Reason } from "../../protocol/mqttReasons.js";
import type { MqttSettings } from "./settings.js";

/**
 * The bytes the gateway holds for one MQTT client on their way out (limits.max_client_buffer,
 * docs/decisions/backpressure.md): what its socket has not taken yet, what this tick gathered
 * for it, and the QoS 1/2 messages waiting for a free slot or for CONNACK. While they are at
 * the bound, QoS 0 and unstored QoS 1/2 messages are dropped and counted, stored deliveries
 * stop pulling (the messages stay in their stream), and the waiting ones stay waiting; the
 * socket's `drain` wakes them all. A client that stays at the bound while its socket takes no
 * byte for limits.write_deadline is stuck, and its owner (`protocolError`) ends it (nats-server's slow consumer).
 */
/** Who ends a stuck client (MQTT 5: DISCONNECT 0x97). */
interface StuckOwner {
  protocolError(reasonCode: number, reason: string): void;
}

export class ClientBytes {
  /** Bytes of messages held outside the socket: the QoS 1/2 backlog, deliveries waiting for CONNACK. */
  waiting = 0;
  /** Made on the first stored subscription, or the first time the bound is reached. */
  private drainListeners: Set<() => void> | undefined;
  /** The socket's `drain` listener, attached on first need. */
  private drainListener: (() => void) | undefined;
  /** The QoS 1/2 backlog's pump (outbound.ts): the socket took everything, the backlog may follow. */
  onSocketDrain: { socketDrained(): void } | undefined;
  /** The bound was reached since the last wake (a scheduling guard: who waits is woken once). */
  private wasFull = false;
  private stuckTimer: ReturnType<typeof setTimeout> | undefined;
  /** Told once when found stuck (then dropped: nothing is checked again); the connection itself, not a closure. */
  private stuck: StuckOwner | undefined;
  /** What had left the socket when the bound was reached: no change by the deadline is stuck. */
  private leftAtFull = 0;

  constructor(
    readonly limit: number,
    private readonly deadlineMs: number,
    private readonly socket: {
      readonly writableLength: number;
      readonly destroyed: boolean;
      on(event: "drain", listener: () => void): unknown;
    },
    /** Bytes gathered and not yet written, and bytes handed to the socket so far (outbox.ts). */
    private readonly outbox: { pending(): number; readonly written: number },
    owner: StuckOwner,
  ) {
    this.stuck = owner;
  }

  /** One MQTT connection's: ended as a slow consumer (MQTT 5: DISCONNECT 0x97) when stuck. */
  static of(
    settings: Pick<MqttSettings, "maxClientBuffer" | "writeDeadlineMs">,
    socket: ClientBytes["socket"],
    outbox: ClientBytes["outbox"],
    owner: StuckOwner,
  ): ClientBytes {
    return new ClientBytes(settings.maxClientBuffer, settings.writeDeadlineMs, socket, outbox, owner);
  }

  /** Everything held for the client now. */
  held(): number {
    return this.socket.writableLength + this.outbox.pending() + this.waiting;
  }

  /** Below the bound on the socket's side: another packet may be written now. */
  writable(): boolean {
    if (this.socket.writableLength + this.outbox.pending() < this.limit) return true;
    this.reached();
    return false;
  }

  /** At the bound: nothing more is taken in but what waits already. Arms the stuck check. */
  full(): boolean {
    if (this.held() < this.limit) return false;
    this.reached();
    return true;
  }

  /** Bytes went (a PUBACK let the backlog move, the socket drained): what waited for room may go on. */
  settled(): void {
    if (!this.wasFull || this.held() >= this.limit) return;
    this.wasFull = false;
    if (this.drainListeners) for (const wake of [...this.drainListeners]) wake();
  }

  private reached(): void {
    this.wasFull = true;
    this.watchDrain();
    if (this.stuckTimer === undefined && this.stuck && !this.socket.destroyed) this.armStuck();
  }

  /** How many messages of about `typical` bytes fit now (0 at the bound, at most `most`). */
  room(typical: number, most: number): number {
    if (this.full()) return 0;
    return Math.max(1, Math.min(most, Math.floor((this.limit - this.held()) / Math.max(1, typical))));
  }

  /** `wake` runs when the bytes held go below the bound after reaching it; the returned function stops that. */
  onDrain(wake: () => void): () => void {
    this.watchDrain();
    const listeners = this.drainListeners ?? new Set();
    this.drainListeners = listeners;
    listeners.add(wake);
    return () => listeners.delete(wake);
  }

  /** The connection ends: no stuck check outlives it. */
  close(): void {
    if (this.stuckTimer !== undefined) clearTimeout(this.stuckTimer);
    this.stuckTimer = undefined;
    this.drainListeners?.clear();
    this.onSocketDrain = undefined;
  }

  private watchDrain(): void {
    if (this.drainListener) return;
    this.drainListener = () => {
      this.onSocketDrain?.socketDrained();
      this.settled();
    };
    this.socket.on("drain", this.drainListener);
  }

  /** Bytes the socket has written (it is handed at most 256 KiB ahead, outbox.ts). */
  private left(): number {
    return this.outbox.written - this.socket.writableLength;
  }

  private armStuck(): void {
    this.leftAtFull = this.left();
    this.stuckTimer = setTimeout(() => this.checkStuck(), this.deadlineMs);
    this.stuckTimer.unref?.();
  }

  private checkStuck(): void {
    this.stuckTimer = undefined;
    if (this.socket.destroyed || this.held() < this.limit) return;
    // Still at the bound: stuck only if the socket holds bytes and took none all that time. A
    // client that reads but does not acknowledge holds a backlog, which the drops bound.
    if (this.socket.writableLength > 0 && this.left() === this.leftAtFull) {
      const stuck = this.stuck;
      this.close();
      this.stuck = undefined;
      return stuck?.protocolError(Reason.quotaExceeded, "slow consumer: nothing read for limits.write_deadline");
    }
    this.armStuck();
  }
}
