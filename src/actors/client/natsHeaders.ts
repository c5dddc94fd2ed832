import { type MsgHdrs, headers as natsHeaders } from "@nats-io/transport-node";
import { encodedOnce } from "../../vendor/natsjs.js";

/** Header pairs (the mappings' output, in order, a name repeated as often as it comes) as nats.js headers: both doors publish with these. */
export function toNatsHeaders(pairs: Iterable<readonly [string, string]>): MsgHdrs {
  const h = natsHeaders();
  for (const [k, v] of pairs) h.append(k, v);
  return h;
}

/**
 * `toNatsHeaders(pairs)` encoded once: nats.js calls `encode()` on every publish, and a
 * block that is the same for every message of a connection (a bare MQTT publish's
 * Mqgw-Mqtt-Client-Id) cost a string build and a UTF-8 encode each time (issue 16). The
 * object must not be changed after this (a `set` would not reach the cached bytes): pass
 * no trace options with it, which are nats.js's only writes to a publish's headers.
 */
export function fixedNatsHeaders(pairs: Iterable<readonly [string, string]>): MsgHdrs {
  return encodedOnce(toNatsHeaders(pairs));
}
