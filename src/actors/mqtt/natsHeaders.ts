import type { MsgHdrs } from "@nats-io/transport-node";
import { isStoredCopy } from "../../protocol/headers.js";
import { plainBlockSaysQos12, plainBlockSaysStoredCopy, plainHeaderPairs } from "../../protocol/natsHeaderBlock.js";
import { headerBlockOf, headerLengthOf, messageBytesOf } from "../../vendor/natsjs.js";

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

/**
 * A core NATS message whose headers say Mqgw-QoS 1 or 2, told from its bytes without
 * reading its headers; undefined when that cannot be told so (the caller reads them).
 */
export function saysQos12(m: { readonly headers?: MsgHdrs | undefined }): boolean | undefined {
  const block = headerBlockOf(m);
  return block === undefined ? undefined : block === null ? false : plainBlockSaysQos12(block);
}

/** Mqgw-QoS 1 or 2: from the bytes when they are plain, else from the headers. */
export function carriesQos12(m: { readonly headers?: MsgHdrs | undefined }): boolean {
  const fast = saysQos12(m);
  if (fast !== undefined) return fast;
  for (const [k, v] of headerPairsOf(m) ?? []) if (k.toLowerCase() === "mqgw-qos") return v === "1" || v === "2";
  return false;
}

/**
 * The core copy of a message a stream keeps (Mqgw-QoS 1/2 and a Nats-Msg-Id,
 * docs/decisions/mqtt-store.md): from the bytes when they are plain, else from the headers.
 */
export function storedCopy(m: { readonly headers?: MsgHdrs | undefined }): boolean {
  const block = headerBlockOf(m);
  if (block === null) return false;
  const fast = block && plainBlockSaysStoredCopy(block);
  if (fast !== undefined) return fast;
  const pairs = headerPairsOf(m);
  return pairs !== undefined && isStoredCopy(pairs);
}
