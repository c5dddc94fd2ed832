// Moving an accepted TCP socket between the processes of `run --workers` (Node's IPC
// passes its descriptor), with no byte of it lost (docs/decisions/session-homes.md).
import { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { TLSSocket } from "node:tls";

/**
 * net.Socket's libuv handle (and the `reading` mark net.Socket keeps on it): the same since
 * Node 0.x. It is what moves: Node's IPC passes a bare handle as it is (cluster's own
 * round-robin passes accepted connections so), where a net.Socket would be wrapped again in
 * every process on the way, and the primary's wrapper would start reading it.
 * test/gateway/workers.test.ts loses bytes if any of this goes.
 */
export interface TcpHandle {
  readStop(): number;
  close(): void;
}

/** A plain TCP socket still open: the kind whose descriptor can move (TLS and WebSocket state cannot). */
export const canMove = (socket: Duplex): socket is Socket =>
  socket instanceof Socket && !(socket instanceof TLSSocket) && !socket.destroyed && handleOf(socket) !== undefined;

export const handleOf = (socket: Socket): TcpHandle | undefined =>
  (socket as unknown as { _handle?: TcpHandle | null })._handle ?? undefined;

/** Whether `handle`, as a worker or the primary received it, is a bare TCP handle. */
export const isTcpHandle = (handle: unknown): handle is TcpHandle =>
  typeof handle === "object" &&
  handle !== null &&
  !(handle instanceof Socket) &&
  typeof (handle as TcpHandle).readStop === "function";

/** A socket over a handle another process read from (its reads start when it is read). */
export const socketOver = (handle: TcpHandle): Socket =>
  // `handle` is net.Socket's own option for a handle it did not open (not in its typings).
  new Socket({ handle, readable: true, writable: true } as ConstructorParameters<typeof Socket>[0]);

/**
 * Stops every read of the socket in this process and answers what was read but not yet
 * taken. Node reads a socket on its own: a pause only stops the `data` events while its
 * buffer fills, and a buffered read that empties the buffer asks for more. Bytes read here
 * once the descriptor is on its way would be lost with this process's handle; stopped,
 * they wait in the kernel for the process that gets it.
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
