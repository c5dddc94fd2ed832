import { randomFillSync } from "node:crypto";
import {
  newTraceparent,
  parseTraceparent,
  TRACEPARENT,
  traceHeader,
  withTraceparentHeader,
} from "../../protocol/traceContext.js";
import type { Hop, Tracing } from "./tracing.js";

/** Random bytes for this many new traces are drawn at once: one system call per batch, not per message. */
const POOL_TRACES = 256;
const BYTES_PER_TRACE = 24;

/**
 * `tracing.generate` without `tracing.otlp`: a client's publish without a valid
 * `traceparent` is given a new sampled one, so every receiver and every service after
 * them shares its trace id. No spans: the gateway itself is not in the trace.
 */
export class GeneratedTraces implements Tracing {
  private readonly pool = Buffer.alloc(POOL_TRACES * BYTES_PER_TRACE);
  private next = POOL_TRACES;

  published(_hop: Hop, pairs: Array<[string, string]> | undefined): Array<[string, string]> | undefined {
    const present = traceHeader(pairs, TRACEPARENT);
    if (present !== undefined && parseTraceparent(present) !== undefined) return pairs;
    return withTraceparentHeader(pairs, newTraceparent(this.random()));
  }

  delivering(): string | undefined {
    return undefined;
  }

  async shutdown(): Promise<void> {}

  private random(): Uint8Array {
    if (this.next === POOL_TRACES) {
      randomFillSync(this.pool);
      this.next = 0;
    }
    const at = this.next++ * BYTES_PER_TRACE;
    return this.pool.subarray(at, at + BYTES_PER_TRACE);
  }
}
