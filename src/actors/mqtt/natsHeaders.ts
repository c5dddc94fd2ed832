import type { MsgHdrs } from "@nats-io/transport-node";
import { plainBlockSaysQos12, plainBlockSaysStoredCopy, plainHeaderPairs } from "../../protocol/natsHeaderBlock.js";
import { isStoredCopy } from "../../protocol/headers.js";

/** Where nats.js keeps a message's bytes (MsgImpl; a JsMsg wraps one as `msg`). Not public API: every field is checked. */
interface RawMsg {
  readonly _msg?: { readonly hdr?: number };
  readonly _rdata?: Uint8Array;
  readonly msg?: RawMsg;
}

/**
 * The header pairs of a NATS message or JsMsg, as `keys()`/`values()` of its MsgHdrs give
 * them, or undefined when it has none. Plain header blocks are read from the bytes
 * (`plainHeaderPairs`); anything else, or a nats.js that keeps its bytes elsewhere, goes
 * through `m.headers` as before.
 */
export function headerPairsOf(m: { readonly headers?: MsgHdrs | undefined }): Array<[string, string]> | undefined {
  const raw = (m as RawMsg).msg ?? (m as RawMsg);
  const hdr = raw._msg?.hdr;
  if (typeof hdr === "number" && raw._rdata instanceof Uint8Array) {
    if (hdr < 0) return undefined;
    const fast = plainHeaderPairs(raw._rdata.subarray(0, hdr));
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
  const raw = m as RawMsg;
  const hdr = raw._msg?.hdr;
  if (typeof hdr !== "number" || !(raw._rdata instanceof Uint8Array)) return undefined;
  return hdr < 0 ? false : plainBlockSaysQos12(raw._rdata.subarray(0, hdr));
}

/** The block of header bytes of a nats.js message, or undefined when that cannot be read so. */
function rawBlock(m: { readonly headers?: MsgHdrs | undefined }): Uint8Array | null | undefined {
  const raw = m as RawMsg;
  const hdr = raw._msg?.hdr;
  if (typeof hdr !== "number" || !(raw._rdata instanceof Uint8Array)) return undefined;
  return hdr < 0 ? null : raw._rdata.subarray(0, hdr);
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
  const block = rawBlock(m);
  if (block === null) return false;
  const fast = block && plainBlockSaysStoredCopy(block);
  if (fast !== undefined) return fast;
  const pairs = headerPairsOf(m);
  return pairs !== undefined && isStoredCopy(pairs);
}
