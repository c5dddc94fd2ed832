import type { MsgHdrs } from "@nats-io/transport-node";
import { encodedOnce } from "../../vendor/natsjs.js";
import { toNatsHeaders } from "./natsHeaders.js";

// The NATS headers both doors publish again and again, encoded once (issue 16): nats.js
// calls `encode()` on every publish, a string build and a UTF-8 encode each time.

/**
 * `toNatsHeaders(pairs)` encoded once, for a block that is the same for every message of
 * a connection (a bare MQTT publish's Mqgw-Mqtt-Client-Id). The object must not be
 * changed after this (a `set` would not reach the cached bytes): pass no trace options
 * with it, which are nats.js's only writes to a publish's headers.
 */
export function fixedNatsHeaders(pairs: Iterable<readonly [string, string]>): MsgHdrs {
  return encodedOnce(toNatsHeaders(pairs));
}

/**
 * The last header pairs a publisher sent and their `fixedNatsHeaders`: one sender's
 * messages mostly carry the same few pairs (an AMQP link's). Safe to share between
 * publishes: nats.js does not change the headers of a publish without trace options, and
 * the block is the same bytes `toNatsHeaders` would give.
 */
export class HeaderCache {
  private last: { readonly pairs: ReadonlyArray<readonly [string, string]>; readonly h: MsgHdrs } | undefined;

  /** The headers of `pairs`: the last ones when the pairs are the same (by identity or by value), else encoded once and kept. */
  headersOf(pairs: ReadonlyArray<readonly [string, string]>): MsgHdrs {
    const last = this.last;
    if (last && samePairs(last.pairs, pairs)) return last.h;
    const h = fixedNatsHeaders(pairs);
    this.last = { pairs, h };
    return h;
  }
}

function samePairs(a: ReadonlyArray<readonly [string, string]>, b: ReadonlyArray<readonly [string, string]>): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i]![0] !== b[i]![0] || a[i]![1] !== b[i]![1]) return false;
  return true;
}
