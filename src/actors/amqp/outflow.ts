import type { Duplex } from "node:stream";

/**
 * Bytes one connection's receiving links may have on their way to the client
 * (docs/decisions/backpressure.md): in the socket's write queue plus transfers handed to
 * rhea and not yet written. Credit alone does not bound this: a client may grant a
 * million and stop reading its socket.
 */
export const OUTBOUND_HIGH_WATER = 4 * 1024 * 1024;
/**
 * Bytes of transfers written but not yet settled by the client, per connection. rhea
 * keeps each one until it is settled; a client that never settles gets nothing more
 * past this, until it does.
 */
export const UNSETTLED_HIGH_WATER = 64 * 1024 * 1024;

/** A receiving link as the outflow sees it. */
export interface OutflowLink {
  /** Bytes of transfers it handed to rhea that rhea has not written yet. */
  unsentBytes(): number;
  /** There may be room again: pump. */
  refill(): void;
}

export class Outflow {
  private unsettledBytes = 0;
  private readonly links = new Set<OutflowLink>();
  private readonly waiting = new Set<OutflowLink>();
  private checkScheduled = false;

  constructor(
    private readonly socket: Duplex,
    private readonly highWater = OUTBOUND_HIGH_WATER,
    private readonly unsettledHighWater = UNSETTLED_HIGH_WATER,
  ) {
    // The socket wrote what it had queued.
    socket.on("drain", () => this.wake());
  }

  add(l: OutflowLink): void {
    this.links.add(l);
  }

  remove(l: OutflowLink): void {
    this.links.delete(l);
    this.waiting.delete(l);
  }

  /** Bytes that may still be sent now; 0 or less: wait. A single transfer may overshoot it. */
  room(): number {
    let queued = this.socket.writableLength;
    for (const l of this.links) queued += l.unsentBytes();
    return Math.min(this.highWater - queued, this.unsettledHighWater - this.unsettledBytes);
  }

  /** Bytes the client holds unsettled. */
  unsettled(): number {
    return this.unsettledBytes;
  }

  held(bytes: number): void {
    this.unsettledBytes += bytes;
  }

  /** The client settled (or the link let go of) unsettled transfers of this many bytes. */
  released(bytes: number): void {
    this.unsettledBytes = Math.max(0, this.unsettledBytes - bytes);
    this.check();
  }

  wait(l: OutflowLink): void {
    this.waiting.add(l);
  }

  /**
   * The client sent something (a flow or disposition may let rhea write, which ends
   * with no 'drain' when the socket never filled): look again once rhea has written.
   */
  check(): void {
    if (this.waiting.size === 0 || this.checkScheduled) return;
    this.checkScheduled = true;
    setImmediate(() => {
      this.checkScheduled = false;
      if (this.room() > 0) this.wake();
    });
  }

  private wake(): void {
    if (this.waiting.size === 0) return;
    const ws = [...this.waiting];
    this.waiting.clear();
    for (const w of ws) w.refill();
  }
}
