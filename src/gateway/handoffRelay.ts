// The primary's part in moving a socket to its session's home worker (docs/decisions/session-homes.md):
// Node's cluster lets a worker pass a descriptor to the primary only, so the primary passes it on.
import type { Worker } from "node:cluster";
import { Socket } from "node:net";
import { stopReading } from "./socketMove.js";
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
  if (!(handle instanceof Socket)) return;
  // Node began reading the descriptor as it arrived here: what it read goes on with the rest.
  const late = stopReading(handle);
  const bytes = late ? Buffer.concat([Buffer.from(m.bytes, "base64"), late]).toString("base64") : m.bytes;
  const live = workers?.live();
  const home = workers?.serving(m.to) ? live?.get(m.to) : undefined;
  const [worker, message]: [Worker | undefined, SocketHandoff] = home?.isConnected()
    ? [home, { ...m, bytes }]
    : [live?.get(m.from), { mqgw: "handoff", to: m.from, from: m.from, bytes, stay: true }];
  if (!worker?.isConnected()) return void handle.destroy();
  // Sent, the descriptor is the worker's; the object left here only has its `close` to give.
  worker.send(message, handle, () => handle.destroy());
}
