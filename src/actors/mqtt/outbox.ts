import { encodePublishInto } from "../../protocol/mqttFastPath.js";
import type { PublishProperties } from "../../protocol/mqttProperties.js";

/** The smallest and largest buffer one tick's packets are gathered in. */
const MIN = 256;
const MAX = 64 * 1024;
/**
 * How far ahead of what the peer has taken the socket is handed bytes. Node hands libuv
 * everything buffered as one write and reports nothing until all of it is written, so a
 * socket handed 4 MiB shows no progress until the peer took 4 MiB; handed at most this
 * much, it shows progress every 256 KiB (clientBytes.ts tells slow from stuck by it).
 */
const AHEAD = 256 * 1024;

/**
 * What one event-loop tick writes to one socket, gathered in one buffer and written once
 * when the tick ends (docs/performance.md). Deliveries are encoded straight into it: no
 * Buffer and no stream write per packet. The buffer is sized from the previous tick's
 * bytes and handed to the socket whole, so an idle connection holds none.
 */
export class Outbox {
  private buf: Buffer | undefined;
  private end = 0;
  /** Bytes this tick already wrote when its buffer filled, and the previous tick's total. */
  private tickBytes = 0;
  private lastTick = MIN;
  /** Bytes handed to the socket so far: what has left it is this less its writableLength (clientBytes.ts). */
  written = 0;

  /** Buffers gathered and waiting for the socket to take what it was handed (AHEAD). */
  private queue: Buffer[] | undefined;
  private queued = 0;

  constructor(
    private readonly sink: {
      write(chunk: Buffer, done?: () => void): unknown;
      readonly destroyed: boolean;
      readonly writableLength?: number;
    },
  ) {}

  /** Bytes gathered and not yet handed to the socket. */
  pending(): number {
    return this.end + this.queued;
  }

  /** The socket is ending: it is handed everything still queued first. */
  close(): void {
    this.flush();
    this.feed(Number.POSITIVE_INFINITY);
  }

  /** A PUBLISH of `size` bytes (`publishLength`, `encodePublishInto`). */
  publish(
    size: number,
    version: 4 | 5,
    topic: string,
    topicBytes: number,
    payload: Uint8Array,
    qos: 0 | 1 | 2,
    retain: boolean,
    dup: boolean,
    messageId: number | undefined,
    properties: PublishProperties | undefined,
    propsBytes: number,
  ): void {
    const at = this.reserve(size);
    encodePublishInto(
      this.buf!,
      at,
      version,
      topic,
      topicBytes,
      payload,
      qos,
      retain,
      dup,
      messageId,
      properties,
      propsBytes,
    );
  }

  /** An encoded packet. */
  bytes(packet: Uint8Array): void {
    const at = this.reserve(packet.byteLength);
    this.buf!.set(packet, at);
  }

  /** Writes what was gathered now (before the socket ends, or when the tick ends). */
  flush(): void {
    const b = this.buf;
    if (!b) return;
    const n = this.end;
    this.buf = undefined;
    this.end = 0;
    this.lastTick = this.tickBytes + n;
    this.tickBytes = 0;
    if (n > 0) this.send(n === b.length ? b : b.subarray(0, n));
  }

  private send(chunk: Buffer): void {
    if (this.sink.destroyed) return;
    if (this.queue === undefined && (this.sink.writableLength ?? 0) < AHEAD) {
      this.written += chunk.length;
      this.sink.write(chunk, this.taken);
      return;
    }
    this.queue ??= [];
    this.queue.push(chunk);
    this.queued += chunk.length;
  }

  /** A write was taken: hand the socket more while it holds less than AHEAD. */
  private readonly taken = (): void => this.feed(AHEAD);

  private feed(ahead: number): void {
    const q = this.queue;
    if (!q) return;
    while (q.length > 0 && !this.sink.destroyed && (this.sink.writableLength ?? 0) < ahead) {
      const chunk = q.shift()!;
      this.queued -= chunk.length;
      this.written += chunk.length;
      this.sink.write(chunk, this.taken);
    }
    if (q.length === 0 || this.sink.destroyed) {
      this.queue = undefined;
      this.queued = 0;
    }
  }

  private reserve(size: number): number {
    let b = this.buf;
    if (b && b.length - this.end < size) {
      // Full: what is there goes first, the tick goes on in a larger buffer.
      const grown = b.length * 2;
      this.send(b.subarray(0, this.end));
      this.tickBytes += this.end;
      b = this.buf = Buffer.allocUnsafe(Math.max(size, Math.min(grown, MAX)));
      this.end = 0;
    } else if (!b) {
      b = this.buf = Buffer.allocUnsafe(Math.max(size, Math.min(MAX, this.lastTick + (this.lastTick >> 2) + MIN)));
      this.end = 0;
      // A shared function with the outbox as argument: no bound closure per connection.
      process.nextTick(flushAtTickEnd, this);
    }
    const at = this.end;
    this.end += size;
    return at;
  }
}

const flushAtTickEnd = (outbox: Outbox): void => outbox.flush();
