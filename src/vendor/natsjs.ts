/**
 * nats.js internals the gateway reads, in one place (docs/decisions/vendor-patches.md).
 * @nats-io/transport-node and @nats-io/jetstream 3.4.0, pinned (nats-core 3.4.0 with them);
 * test/vendor.test.ts fails when the source of the classes read here changes.
 */
import { MsgImpl, NatsConnectionImpl } from "@nats-io/nats-core/internal";
import type { MsgHdrs, NatsConnection } from "@nats-io/transport-node";

/**
 * The upstream classes read here (test/vendor.test.ts hashes their source). A JsMsg's
 * wrapper (`JsMsgImpl.msg`, not exported) is read too; if that goes, headerBlockOf answers
 * undefined and the caller reads `m.headers`: slower, not wrong.
 */
export const upstream: Readonly<Record<string, unknown>> = {
  "@nats-io/nats-core MsgImpl": MsgImpl,
  "@nats-io/nats-core NatsConnectionImpl": NatsConnectionImpl,
};

/**
 * Where nats.js keeps a message's bytes: `MsgImpl._msg.hdr` (the header block's length, -1
 * for none) and `MsgImpl._rdata` (the bytes); a JsMsg wraps one as `JsMsgImpl.msg`.
 */
interface RawMsg {
  readonly _msg?: { readonly hdr?: number };
  readonly _rdata?: Uint8Array;
  readonly msg?: RawMsg;
}

/**
 * A message's raw header block (`NATS/1.0 ...` up to the blank line), null when it has
 * none, undefined when nats.js keeps its bytes elsewhere than this expects (the caller
 * reads `m.headers` then). Reading the block saves decoding MsgHdrs per message.
 */
export function headerBlockOf(m: { readonly headers?: MsgHdrs | undefined }): Uint8Array | null | undefined {
  const raw = (m as RawMsg).msg ?? (m as RawMsg);
  const hdr = raw._msg?.hdr;
  if (typeof hdr !== "number" || !(raw._rdata instanceof Uint8Array)) return undefined;
  return hdr < 0 ? null : raw._rdata.subarray(0, hdr);
}

/** The inbox prefix a connection was made with (`NatsConnectionImpl.options.inboxPrefix`), which its permissions allow. */
export function inboxPrefixOf(nc: NatsConnection): string | undefined {
  return (nc as { options?: { inboxPrefix?: string } }).options?.inboxPrefix;
}
