import type { Duplex } from "node:stream";

/** How long a half-closed MQTT socket waits for its peer to close before it is destroyed. */
export const CLOSE_GRACE_MS = 2_000;

const drop = (): void => {};

/**
 * Ends an MQTT socket so that its peer reads what was written last (a DISCONNECT with
 * its reason) before the close: a half-close (FIN) after the bytes, then whatever the
 * peer still sends is read and dropped. Destroying a socket with unread bytes makes the
 * close a reset, and a reset can discard the DISCONNECT before the peer reads it (a
 * client still writing got EPIPE and never saw 0x93: Paho's test_flow_control2). A peer
 * that never closes is cut off after CLOSE_GRACE_MS. What the outbox still holds is
 * handed to the socket first, and the outbox takes nothing more (outbox.ts).
 */
export function endSocket(socket: Duplex, outbox?: { close(): void }): void {
  outbox?.close();
  if (socket.destroyed) return;
  socket.removeAllListeners("data");
  socket.on("data", drop);
  socket.resume();
  if (socket.writableEnded) return;
  socket.end();
  setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref();
}
