import type { MsgHdrs } from "@nats-io/transport-node";
import { plainHeaderPairs } from "../../protocol/natsHeaderBlock.js";
import { headerBlockOf, headerLengthOf, messageBytesOf } from "../../vendor/natsjs.js";

// How both doors read a NATS message's headers: as pairs, from the bytes where they can.

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
 * `headerPairsOf` for one subscription, remembering the last plain block it read: a
 * publisher's messages all carry the same block (a bare MQTT publish's
 * Mqgw-Mqtt-Client-Id), so most messages cost a byte compare instead of a parse (issue
 * 16). The answer is shared between the messages it fits: callers only read it.
 */
export function headerPairsReader(): (m: {
  readonly headers?: MsgHdrs | undefined;
}) => Array<[string, string]> | undefined {
  let last: Uint8Array | undefined;
  let lastPairs: Array<[string, string]> | undefined;
  return (m) => {
    const length = headerLengthOf(m);
    if (length === undefined) return headerPairsOf(m);
    if (length < 0) return undefined;
    const bytes = messageBytesOf(m);
    // Compared in place: a view of the block per message was a tenth of what reading costs.
    if (last !== undefined && last.length === length && samePrefix(bytes, last)) return lastPairs;
    const block = bytes.subarray(0, length);
    const fast = plainHeaderPairs(block);
    if (fast === undefined) return headerPairsOf(m);
    // A copy: the block is a view of nats.js's read buffer, which it would keep alive.
    last = block.slice();
    lastPairs = fast;
    return fast;
  };
}

/** `bytes` starts with `prefix` (compared from its end: blocks of one form differ last, in their values). */
function samePrefix(bytes: Uint8Array, prefix: Uint8Array): boolean {
  if (bytes.length < prefix.length) return false;
  for (let i = prefix.length - 1; i >= 0; i--) if (bytes[i] !== prefix[i]) return false;
  return true;
}
