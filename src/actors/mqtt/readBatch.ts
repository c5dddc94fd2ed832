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
