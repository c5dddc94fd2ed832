import type { Duplex } from "node:stream";

/**
 * Socket reads of all MQTT clients in one event-loop turn are handled in one callback
 * (docs/performance.md). nats.js sends what one callback published in one write, so the
 * NATS connection then carries many clients' publishes per write instead of one socket
 * read's worth, which roughly halves nats-server's CPU per message.
 *
 * At most SLICE connections a turn: the rest wait for the next turn, after timers and
 * NATS's own reads. 10,000 sessions dropped (or reconnecting) at once were one turn of
 * about 1.8 s, in which no pull's end, no JetStream answer and no timer was heard.
 */
const pendingReads: Array<{ takeReads(): void }> = [];
let readsScheduled = false;
const SLICE = 512;

function handlePendingReads(): void {
  readsScheduled = false;
  const batch = pendingReads.splice(0, SLICE);
  if (pendingReads.length > 0) {
    readsScheduled = true;
    setImmediate(handlePendingReads);
  }
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

/** Queues a connection whose socket delivered data (or closed) this turn; `takeReads` runs in a setImmediate shared by all. */
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
  /** "closed": the socket closed; the reader hears it after the chunks before it, in the shared callback. */
  private end: "open" | "closed" = "open";

  constructor(
    private readonly socket: Duplex,
    /** Takes each chunk and the close (the connection itself: no closure per connection). */
    private readonly reader: { onData(chunk: Buffer): void; onClosed(): void },
  ) {}

  add(chunk: Buffer): void {
    if (this.queue) {
      this.queue.push(chunk);
      return;
    }
    this.queue = [chunk];
    scheduleReads(this);
  }

  /** The socket closed: its reader hears it in the shared callback, after what arrived before (a DISCONNECT). */
  closed(): void {
    this.end = "closed";
    if (this.queue) return;
    this.queue = [];
    scheduleReads(this);
  }

  /** Once the socket closed, what arrived before the close counts and nothing is put back. */
  takeReads(): void {
    const q = this.queue;
    if (!q) return;
    this.queue = undefined;
    const closing = this.end === "closed";
    try {
      for (let i = 0; i < q.length; i++) {
        if (this.socket.isPaused()) {
          if (!closing) for (let j = q.length - 1; j >= i; j--) this.socket.unshift(q[j]!);
          return;
        }
        this.reader.onData(q[i]!);
      }
    } finally {
      if (closing) this.reader.onClosed();
    }
  }
}

/** A socket's `error` listener where `close` follows and says what is needed: one for all sockets. */
export const ignoreSocketError = (): void => {};
