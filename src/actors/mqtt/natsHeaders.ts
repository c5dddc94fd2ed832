import type { MsgHdrs } from "@nats-io/transport-node";
import { isStoredCopy } from "../../protocol/headers.js";
import { plainBlockSaysQos12, plainBlockSaysStoredCopy } from "../../protocol/natsHeaderBlock.js";
import { headerBlockOf } from "../../vendor/natsjs.js";
import { headerPairsOf } from "../client/headerPairs.js";

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
