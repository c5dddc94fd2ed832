import type { MsgHdrs } from "@nats-io/transport-node";
import { plainBlockSaysQos12, plainHeaderPairs } from "../../protocol/natsHeaderBlock.js";
import { headerBlockOf } from "../../vendor/natsjs.js";

/**
 * The header pairs of a NATS message or JsMsg, as `keys()`/`values()` of its MsgHdrs give
 * them, or undefined when it has none. Plain header blocks are read from the bytes
 * (`plainHeaderPairs`); anything else, or a nats.js that keeps its bytes elsewhere, goes
 * through `m.headers` as before.
 */
export function headerPairsOf(m: { readonly headers?: MsgHdrs | undefined }): Array<[string, string]> | undefined {
  const block = headerBlockOf(m);
  if (block === null) return undefined;
  if (block) {
    const fast = plainHeaderPairs(block);
    if (fast) return fast;
  }
  const h = m.headers;
  if (!h) return undefined;
  const out: Array<[string, string]> = [];
  for (const k of h.keys()) for (const v of h.values(k)) out.push([k, v]);
  return out;
}

/**
 * A core NATS message whose headers say Mqgw-QoS 1 or 2, told from its bytes without
 * reading its headers; undefined when that cannot be told so (the caller reads them).
 */
export function saysQos12(m: { readonly headers?: MsgHdrs | undefined }): boolean | undefined {
  const block = headerBlockOf(m);
  return block === undefined ? undefined : block === null ? false : plainBlockSaysQos12(block);
}
