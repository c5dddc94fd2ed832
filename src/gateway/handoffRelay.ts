// The primary's part in moving a socket to its session's home worker (docs/decisions/session-homes.md):
// Node's cluster lets a worker pass a descriptor to the primary only, so the primary passes it on.
import type { Worker } from "node:cluster";
import { isTcpHandle } from "./socketMove.js";
import type { SocketHandoff } from "./workerChannel.js";

/** The workers as the primary's pool knows them (actors/workerPool.ts). */
export interface RelayTargets {
  live(): ReadonlyMap<number, Worker>;
  serving(index: number): boolean;
}

/**
 * Passes a moving socket on to its home worker; when that one does not serve (restarting
 * and not yet listening, stopped on purpose), back to the worker that read it, to be served
 * there. With neither, it is closed and the client connects again.
 */
export function relayHandoff(m: SocketHandoff, handle: unknown, workers: RelayTargets | undefined): void {
  // A bare handle: nothing here reads it, so what the worker sent is all that was read.
  if (!isTcpHandle(handle)) return;
  const live = workers?.live();
  const home = workers?.serving(m.to) ? live?.get(m.to) : undefined;
  const [worker, message]: [Worker | undefined, SocketHandoff] = home?.isConnected()
    ? [home, m]
    : [live?.get(m.from), { ...m, to: m.from, stay: true }];
  if (!worker?.isConnected()) return void handle.close();
  // Sent, the descriptor is the worker's; this process's copy of it is closed.
  worker.send(message, handle as never, () => handle.close());
}
