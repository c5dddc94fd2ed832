/**
 * nats.js internals the gateway reads, in one place (docs/decisions/vendor-patches.md).
 * @nats-io/transport-node and @nats-io/jetstream 3.4.0, pinned (nats-core 3.4.0 with them);
 * test/vendor.test.ts fails when the source of the classes read here changes.
 */
import {
  type Deferred,
  deferred,
  MsgImpl,
  NatsConnectionImpl,
  ProtocolHandler,
  RequestOne,
} from "@nats-io/nats-core/internal";
import type { MsgHdrs, NatsConnection } from "@nats-io/transport-node";
import { loopBusyShare } from "./loopBusy.js";

type SendCommand = (this: ProtocolHandler, cmd: string | Uint8Array, ...payloads: Uint8Array[]) => void;
const proto = ProtocolHandler.prototype as unknown as { sendCommand: SendCommand; publish: unknown };
const originalSendCommand = proto.sendCommand;
type Close = (this: ProtocolHandler, err?: Error) => Promise<void>;
const originalClose = (ProtocolHandler.prototype as unknown as { close: Close }).close;
type Flush = (this: ProtocolHandler, p?: Deferred<void>) => Promise<void>;
const originalFlush = (ProtocolHandler.prototype as unknown as { flush: Flush }).flush;

/** What a request's settling touches (`RequestOne.resolver`, `RequestOne.cancel`). */
interface RequestOneFields {
  timer?: { cancel(): void };
  mux: { cancel(r: unknown): void };
  answered?: true;
}
type Resolver = (this: RequestOneFields, err: Error | null, msg: unknown) => void;
type Cancel = (this: RequestOneFields, err?: Error) => void;
const requestProto = RequestOne.prototype as unknown as { resolver: Resolver; cancel: Cancel };
const originalResolver = requestProto.resolver;
const originalCancel = requestProto.cancel;

/**
 * The upstream classes read here (test/vendor.test.ts hashes their source). A JsMsg's
 * wrapper (`JsMsgImpl.msg`, not exported) is read too; if that goes, headerBlockOf answers
 * undefined and the caller reads `m.headers`: slower, not wrong.
 */
export const upstream: Readonly<Record<string, unknown>> = {
  "@nats-io/nats-core MsgImpl": MsgImpl,
  "@nats-io/nats-core NatsConnectionImpl": NatsConnectionImpl,
  // The unpatched function, so the hash does not see the patch; and the caller that gives it strings.
  "@nats-io/nats-core ProtocolHandler.sendCommand": originalSendCommand,
  "@nats-io/nats-core ProtocolHandler.publish": proto.publish,
  "@nats-io/nats-core ProtocolHandler.close": originalClose,
  "@nats-io/nats-core ProtocolHandler.flush": originalFlush,
  "@nats-io/nats-core RequestOne.resolver": originalResolver,
  "@nats-io/nats-core RequestOne.cancel": originalCancel,
};

/** What `sendCommand` and `close` touch of a ProtocolHandler. */
interface Outbound {
  readonly outbound: { length(): number; size(): number; fill(b: Uint8Array, ...more: Uint8Array[]): void };
  readonly pendingLimit: number;
  flushPending(): void;
}

/**
 * Replaces `ProtocolHandler.sendCommand`, doing what it does with two differences:
 *
 * - a protocol line given as a string (every `PUB`/`HPUB` line, one per message) is made
 *   bytes with `Buffer.from`, not nats.js's `TextEncoder.encode`, which cost about 1 µs a
 *   message on Node 20, a tenth of an MQTT -> NATS message (issue 16). The same UTF-8 bytes
 *   (test/vendor.test.ts checks them); a Buffer is the Uint8Array nats.js expects;
 * - what was queued is written at `setImmediate`, once per turn of the event loop, where
 *   nats.js writes at `queueMicrotask`, once per I/O callback. The gateway's commands come
 *   from many client sockets' callbacks in one turn (a reconnect storm: each session's KV
 *   read and write, pulls, subscriptions; a storm's end: every connection's record and
 *   unsubscribes): one socket write per callback was 10-16 % of the gateway's CPU in the
 *   sessions bench's storms (issue 24); one per turn cut the drop's CPU by a third and the
 *   storm's by a sixth; a saturated loop waits a millisecond instead (SATURATED). Past
 *   `pendingLimit` bytes it still writes at once, as nats.js does.
 */
const sendCommand: SendCommand = function (cmd, ...payloads) {
  const self = this as unknown as Outbound;
  const empty = self.outbound.length() === 0;
  self.outbound.fill(typeof cmd === "string" ? Buffer.from(cmd, "utf8") : cmd, ...payloads);
  if (!empty) {
    if (self.outbound.size() >= self.pendingLimit) self.flushPending();
  } else if (loopBusyShare() >= SATURATED) setTimeout(() => self.flushPending(), SATURATED_FLUSH_MS);
  else setImmediate(() => self.flushPending());
};

/**
 * A loop busier than this writes what it queued for NATS at most every SATURATED_FLUSH_MS,
 * not every turn. In a reconnect storm a turn carries about one resume's requests (a KV
 * write, a pull), so each turn wrote to nats-server and woke it: 13 % of the gateway's
 * thread in a storm of 10,000 resumes. A millisecond's batch measured 8 % off that storm's
 * median and about a third off nats-server's CPU (docs/decisions/vendor-patches.md). A loop
 * that busy delays every callback by its turns already; one less busy (a latency run at
 * 2,000 messages a second) writes at the end of each turn, as before.
 */
export const SATURATED = 0.8;
const SATURATED_FLUSH_MS = 1;

/**
 * Wraps `ProtocolHandler.close`: what `sendCommand` queued for the next turn is written
 * first, as nats.js's microtask would have written it before `close` reached the transport.
 */
const close: Close = function (err) {
  (this as unknown as Outbound).flushPending();
  return originalClose.call(this, err);
};

const PING = Buffer.from("PING\r\n", "utf8");

/**
 * Replaces `ProtocolHandler.flush` (a PING whose PONG resolves `p`): the PING is queued as
 * `sendCommand` queues, behind everything sent before it, and goes out in the turn's one
 * write, where nats.js wrote the whole queue at once. The gateway asks one per turn that
 * published or subscribed for a client (NatsSeam.confirm: every resume, every MQTT QoS 1
 * publish), so each such turn wrote twice: 5 % of a reconnect storm's CPU (issue 24). The
 * PING still follows what it vouches for in the same buffer; a reconnect discards the buffer
 * and rejects the waiting PONGs together (`resetOutbound`), as before.
 */
const flush: Flush = function (p) {
  const pong = p ?? deferred<void>();
  (this as unknown as { pongs: Deferred<void>[] }).pongs.push(pong);
  sendCommand.call(this, PING);
  return pong;
};

/**
 * `h` with its `encode()` answering the bytes it gives now, every time after: nats.js's
 * `ProtocolHandler.publish` (hashed above) encodes a publish's headers by calling it, so a
 * block that is the same for every message of a connection is encoded once (issue 16).
 * `h` must not change afterwards (a `set` would not reach the bytes).
 */
export function encodedOnce(h: MsgHdrs): MsgHdrs {
  const impl = h as MsgHdrs & { encode(): Uint8Array };
  const bytes = impl.encode();
  impl.encode = () => bytes;
  return h;
}

/**
 * nats.js's `RequestOne.resolver` settles a request, then calls `cancel()`, which rejects
 * its (already settled) promise with a `new RequestError("cancelled")`: an Error with its
 * stack captured for every answered request, thrown away unseen. In a reconnect storm that
 * was 7 % of the gateway's CPU (every JetStream API and KV request). `resolver` marks the
 * request answered; `cancel` of an answered request does what the original does but the
 * useless Error. A request cancelled before its answer goes through nats.js's own cancel.
 */
const resolver: Resolver = function (err, msg) {
  this.answered = true;
  originalResolver.call(this, err, msg);
};
const cancel: Cancel = function (err) {
  if (!this.answered || err) return originalCancel.call(this, err);
  this.timer?.cancel();
  this.mux.cancel(this);
};

/** Installs the patches once, for every NATS connection of the process (the gateway's own). */
export function installNatsPatches(): void {
  if (proto.sendCommand !== sendCommand) proto.sendCommand = sendCommand;
  const handler = ProtocolHandler.prototype as unknown as { close: Close; flush: Flush };
  if (handler.close !== close) handler.close = close;
  if (handler.flush !== flush) handler.flush = flush;
  if (requestProto.resolver !== resolver) {
    requestProto.resolver = resolver;
    requestProto.cancel = cancel;
  }
}

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

/**
 * `headerBlockOf` without making the block's view, for a subscription that compares the
 * block with the last one it read (mqtt/natsHeaders.ts): the header block's length, -1
 * for none, undefined where `headerBlockOf` is; the block is the first that many bytes
 * of `messageBytesOf(m)`.
 */
export function headerLengthOf(m: { readonly headers?: MsgHdrs | undefined }): number | undefined {
  const raw = (m as RawMsg).msg ?? (m as RawMsg);
  const hdr = raw._msg?.hdr;
  return typeof hdr === "number" && raw._rdata instanceof Uint8Array ? hdr : undefined;
}

/** The message's bytes, header block first (`MsgImpl._rdata`); only where `headerLengthOf` gave a number. */
export function messageBytesOf(m: { readonly headers?: MsgHdrs | undefined }): Uint8Array {
  return ((m as RawMsg).msg ?? (m as RawMsg))._rdata!;
}

/** The inbox prefix a connection was made with (`NatsConnectionImpl.options.inboxPrefix`), which its permissions allow. */
export function inboxPrefixOf(nc: NatsConnection): string | undefined {
  return (nc as { options?: { inboxPrefix?: string } }).options?.inboxPrefix;
}
