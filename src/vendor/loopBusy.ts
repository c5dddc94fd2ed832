import { performance } from "node:perf_hooks";

/** How long one reading of the event loop's utilization stands. */
const WINDOW_MS = 10;

let last = performance.eventLoopUtilization();
let readAt = performance.now();
let share = 0;

/**
 * The share of the last window (about 10 ms; since the last reading when the loop was not
 * asked for longer) that the event loop spent running callbacks rather than waiting for I/O:
 * 0 to 1. Read at most once a window, so asking per turn costs a clock read.
 */
export function loopBusyShare(): number {
  const now = performance.now();
  if (now - readAt >= WINDOW_MS) {
    const current = performance.eventLoopUtilization();
    share = performance.eventLoopUtilization(current, last).utilization;
    last = current;
    readAt = now;
  }
  return share;
}
