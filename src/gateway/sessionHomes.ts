// A worker's side of session homes under `run --workers N` (docs/decisions/session-homes.md):
// a persistent session is served on the worker its client id names, so its next
// connection finds it there (parked readers, the record it wrote) wherever the kernel
// put the socket.
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { type HomeQuestion, hasHome, homeWorker } from "../protocol/homeWorker.js";
import { canMove, handleOf, isTcpHandle, socketOver, stopReading } from "./socketMove.js";
import type { SocketHandoff, WorkerRole } from "./workerChannel.js";

/** A socket on its way to its session's home worker: it reads no more, and goes when told. */
export interface HomeMove {
  readonly worker: number;
  /** Sends it, once this turn's other reads of it are back in its buffer (readBatch.ts puts them back on a pause). */
  go(): void;
}

/** What an MQTT connection asks when it has read a CONNECT (actors/mqtt/deps.ts). */
export interface SessionHomes {
  /**
   * The socket's move to the CONNECT's home worker when that is another one and the socket
   * can go there (`read`: everything read of it, its CONNECT first); undefined: served here.
   */
  moveFor(connect: HomeQuestion, socket: Duplex, read: () => Buffer[]): HomeMove | undefined;
}

/** Sockets that came here to be served: never moved on again, whatever they ask. */
const arrived = new WeakSet<Duplex>();

export function sessionHomes(role: WorkerRole): SessionHomes {
  return {
    moveFor(connect, socket, read) {
      if (role.count < 2 || arrived.has(socket) || !hasHome(connect)) return undefined;
      const worker = homeWorker(connect.clientId, role.count);
      if (worker === role.index || !canMove(socket)) return undefined;
      const bytes = Buffer.concat(read());
      socket.pause();
      return {
        worker,
        go: () => queueMicrotask(() => sendOn(socket as Socket, bytes, { to: worker, from: role.index })),
      };
    },
  };
}

/**
 * Sends the socket's descriptor, with `read` and whatever it holds unread, to the primary.
 * Once sent, what is left here is a socket object whose `close` (it is destroyed) releases
 * its place under limits.max_connections. Not sent (the primary went, the socket closed
 * meanwhile): closed, and the client connects again.
 */
function sendOn(socket: Socket, read: Buffer, to: { to: number; from: number; stay?: true }): void {
  try {
    const handle = handleOf(socket);
    if (socket.destroyed || !handle || !process.connected || !process.send) return void socket.destroy();
    const late = stopReading(socket);
    const bytes = (late ? Buffer.concat([read, late]) : read).toString("base64");
    const message: SocketHandoff = { mqgw: "handoff", ...to, bytes };
    process.send(message, handle as never, undefined, () => socket.destroy());
  } catch {
    socket.destroy();
  }
}

/**
 * Takes the sockets other workers send here, until the returned function is called.
 * `take` answers false when this worker takes no new client (lame duck, stopping): the
 * socket goes back to the worker that read it, to be served there.
 */
export function receiveHandoffs(role: WorkerRole, take: (socket: Socket, read: Buffer) => boolean): () => void {
  const onMessage = (message: unknown, handle: unknown) => {
    const m = message as SocketHandoff | null;
    if (m?.mqgw !== "handoff" || !isTcpHandle(handle)) return;
    const socket = socketOver(handle);
    const read = Buffer.from(m.bytes, "base64");
    arrived.add(socket);
    try {
      if (take(socket, read)) return;
    } catch {
      return void socket.destroy();
    }
    // Not taken here: back to where it was read, which serves it (unless it came from there).
    if (m.stay || m.from === role.index) return void socket.destroy();
    sendOn(socket, read, { to: m.from, from: role.index, stay: true });
  };
  process.on("message", onMessage);
  return () => process.off("message", onMessage);
}
