import { type MsgHdrs, headers as natsHeaders } from "@nats-io/transport-node";

/** Header pairs (the mappings' output, in order, a name repeated as often as it comes) as nats.js headers: both doors publish with these. */
export function toNatsHeaders(pairs: Iterable<readonly [string, string]>): MsgHdrs {
  const h = natsHeaders();
  for (const [k, v] of pairs) h.append(k, v);
  return h;
}
