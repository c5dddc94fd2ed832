import { type MsgHdrs, headers as natsHeaders } from "@nats-io/transport-node";
import { encodeHeaderBlock } from "../../protocol/natsHeaderBlock.js";

// How both doors make the NATS headers of what they publish; headers encoded once, to be
// published again, are headerCache.ts's.

/** Header pairs (the mappings' output, in order, a name repeated as often as it comes) as nats.js headers: both doors publish with these. */
export function toNatsHeaders(pairs: Iterable<readonly [string, string]>): MsgHdrs {
  const h = natsHeaders();
  for (const [k, v] of pairs) h.append(k, v);
  return h;
}

const MSG_ID = "Nats-Msg-Id";

/**
 * The headers of a message that is stored (storedWrite.ts): `pairs` and its Nats-Msg-Id,
 * one block for the client's publish and the stored copy, as nats.js's `publish` takes
 * them. It only calls `encode()` on them (nats-core ProtocolHandler.publish), so a block
 * encoded once is handed over as is; what the encoder steps aside for goes through
 * MsgHdrs, which throws as before.
 */
export function headerBlock(pairs: ReadonlyArray<readonly [string, string]>, msgId: string): MsgHdrs {
  const block = encodeHeaderBlock(pairs, MSG_ID, msgId);
  if (block) return { encode: () => block } as unknown as MsgHdrs;
  const h = natsHeaders();
  for (const [k, v] of pairs) h.append(k, v);
  h.set(MSG_ID, msgId);
  return h;
}
