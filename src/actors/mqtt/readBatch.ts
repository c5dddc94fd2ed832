import type { Duplex } from "node:stream";

/**
 * Socket reads of all MQTT clients in one event-loop turn are handled in one callback
 * (docs/performance.md). nats.js sends what one callback published in one write, so the
 * NATS connection then carries many clients' publishes per write instead of one socket
 * read's worth, which roughly halves nats-server's CPU per message.
 */
const pendingReads: Array<{ takeReads(): void }> = [];
let readsScheduled = false;

function handlePendingReads(): void {
  readsScheduled = false;
  const batch = pendingReads.splice(0, pendingReads.length);
  for (const c of batch) {
    try {
      c.takeReads();
    } catch (e) {
      // Thrown as a socket's own 'data' handler would have thrown it, without starving the others.
      queueMicrotask(() => {
        throw e;
      });
    }
  }
}

/** Queues a connection whose socket delivered data this turn; `takeReads` runs in one setImmediate for all. */
export function scheduleReads(c: { takeReads(): void }): void {
  pendingReads.push(c);
  if (!readsScheduled) {
    readsScheduled = true;
    setImmediate(handlePendingReads);
  }
}

/**
 * One socket's reads, batched as above: chunks of this turn wait for the shared callback,
 * and a socket that its handler paused (backpressure, a protocol error) gets the rest
 * back, to be read again on resume.
 */
export class SocketReads {
  /** Chunks read this event-loop turn, handled with every other client's. */
  private queue: Buffer[] | undefined;

  constructor(
    private readonly socket: Duplex,
    /** Takes each chunk (the connection itself: no closure per connection). */
    private readonly reader: { onData(chunk: Buffer): void },
  ) {}

  add(chunk: Buffer): void {
    if (this.queue) {
      this.queue.push(chunk);
      return;
    }
    this.queue = [chunk];
    scheduleReads(this);
  }

  /** `closing`: the socket closed, so what arrived before the close (a DISCONNECT) counts and nothing is put back. */
  takeReads(closing = false): void {
    const q = this.queue;
    if (!q) return;
    this.queue = undefined;
    for (let i = 0; i < q.length; i++) {
      if (this.socket.isPaused()) {
        if (!closing) for (let j = q.length - 1; j >= i; j--) this.socket.unshift(q[j]!);
        return;
      }
      this.reader.onData(q[i]!);
    }
  }
}

/** A socket's `error` listener where `close` follows and says what is needed: one for all sockets. */
export const ignoreSocketError = (): void => {};
