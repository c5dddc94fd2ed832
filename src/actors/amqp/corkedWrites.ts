import type { Duplex } from "node:stream";

/**
 * rhea writes every frame with its own `socket.write`, so each transfer and each
 * disposition was a syscall of its own. The socket is corked from the first write of a
 * tick to the next tick (`process.nextTick`): what rhea writes in one go (one `_process`
 * runs every session's frames) leaves in one writev (issue 16). Nothing waits longer than
 * the code already running: the bytes go before any I/O or timer runs.
 */
export function corkPerTick(socket: Duplex): void {
  const write = socket.write;
  const uncork = () => socket.uncork();
  socket.write = function (this: Duplex, ...args: Parameters<Duplex["write"]>) {
    // Node's own count says whether this tick corked it already.
    if (socket.writableCorked === 0) {
      socket.cork();
      process.nextTick(uncork);
    }
    return write.apply(this, args);
  } as Duplex["write"];
}
