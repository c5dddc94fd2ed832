// Moving an accepted TCP socket between the processes of `run --workers` (Node's IPC
// passes its descriptor), with no byte of it lost (docs/decisions/session-homes.md).
import { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { TLSSocket } from "node:tls";

/**
 * What of net.Socket's libuv handle is touched here (and its `reading` mark, which net.Socket
 * keeps beside it): the same since Node 0.x, and test/gateway/workers.test.ts loses bytes if
 * it goes.
 */
interface ReadingHandle {
  readStop(): number;
}

/** A plain TCP socket still open: the kind whose descriptor can move (TLS and WebSocket state cannot). */
export const canMove = (socket: Duplex): socket is Socket =>
  socket instanceof Socket && !(socket instanceof TLSSocket) && !socket.destroyed && handleOf(socket) !== undefined;

const handleOf = (socket: Socket): ReadingHandle | undefined =>
  (socket as unknown as { _handle?: ReadingHandle | null })._handle ?? undefined;

/**
 * Stops every read of the socket in this process and answers what was read but not yet
 * taken. Node reads a socket on its own: a pause only stops the `data` events while its
 * buffer fills, a socket made from a received descriptor starts reading at once, and a
 * buffered read that empties the buffer asks for more. Bytes read here once the
 * descriptor is on its way would be dropped with this process's handle; stopped, they
 * wait in the kernel for the process that gets it.
 */
export function stopReading(socket: Socket): Buffer | undefined {
  socket.pause();
  const taken: Buffer | null = socket.readableLength > 0 ? socket.read() : null;
  const handle = handleOf(socket);
  if (handle) {
    Object.assign(handle, { reading: false });
    handle.readStop();
  }
  // Nothing may start it again: the stream asks `_read` for more whenever its buffer is low.
  socket._read = () => {};
  return taken ?? undefined;
}
