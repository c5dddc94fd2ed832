/**
 * What the gateway needs from rhea beyond its public API, in one place (the only module
 * that reaches into rhea; docs/decisions/vendor-patches.md). rhea is written for clients;
 * as a server it answers every attach at once, decodes every message into JavaScript
 * values, and lets the sender's queue run ahead of credit. Each patch names the upstream
 * function it replaces, each reader the internal it reads (rhea 3.0.5, pinned);
 * test/vendor.test.ts fails when one of those functions changes, so an upgrade is a decision.
 */
import { createRequire } from "node:module";
import rhea, {
  type Connection,
  type Container,
  type link as Link,
  type Receiver,
  type Sender,
  type Session,
} from "rhea";
import { installFramePatches, upstreamFrames } from "./rheaFrames.js";
import { freshEmptyList, outputWhileOpen, upstreamPatches } from "./rheaPatches.js";

export { peerTerminus } from "./rheaPatches.js";

/** rhea's endpoint state (lib/endpoint.js). */
interface EndpointState {
  local_open: boolean;
  open_requests: number;
}

interface OutgoingDelivery {
  link: unknown;
}

interface SessionInternals {
  outgoing: {
    next_pending_delivery: number;
    next_delivery_id: number;
    deliveries: { by_id(id: number): OutgoingDelivery | undefined; available(): number };
  };
  _write_flow(link: unknown): void;
}

interface LinkInternals {
  state: EndpointState;
  session: SessionInternals;
  local: {
    attach: {
      snd_settle_mode?: number;
      rcv_settle_mode?: number;
      max_message_size?: number;
      source?: unknown;
      target?: unknown;
    };
  };
  credit: number;
  _incomplete?: { frames?: Buffer[] };
  _get_drain(): boolean;
}

const internals = (l: Link) => l as unknown as LinkInternals;

const req = createRequire(import.meta.url);
const sessionModule = req("rhea/lib/session.js") as { prototype: SessionPrototype & { _write_flow: unknown } };
const saslModule = req("rhea/lib/sasl.js") as { Server: { prototype: SaslServerForInit } };
const linkModule = req("rhea/lib/link.js") as { Sender: { prototype: object }; Receiver: { prototype: object } };
const connectionModule = req("rhea/lib/connection.js") as { prototype: { input: unknown; output: unknown } };
const endpointModule = req("rhea/lib/endpoint.js") as { prototype: object };

/**
 * The upstream functions the patches below replace, wrap or re-implement, and those whose
 * behaviour the readers rely on, as rhea has them (taken before any patch is installed).
 * test/vendor.test.ts compares a hash of each one's source with the one recorded there.
 */
export const upstream: Readonly<Record<string, unknown>> = {
  "lib/message.js decode": (rhea.message as unknown as MessageModule).decode,
  "lib/session.js Session.prototype.on_attach": sessionModule.prototype.on_attach,
  "lib/session.js Session.prototype.on_transfer": sessionModule.prototype.on_transfer,
  "lib/session.js Session.prototype._write_flow": sessionModule.prototype._write_flow,
  "lib/sasl.js Server.prototype.on_sasl_init": saslModule.Server.prototype.on_sasl_init,
  "lib/link.js link (what Sender and Receiver share)": Object.getPrototypeOf(linkModule.Sender.prototype),
  "lib/link.js Sender": linkModule.Sender,
  "lib/link.js Receiver": linkModule.Receiver,
  "lib/connection.js Connection.prototype.input": connectionModule.prototype.input,
  "lib/endpoint.js EndpointState": endpointModule,
  ...upstreamFrames,
  ...upstreamPatches,
};

// -- messages as bytes ---------------------------------------------------------------

const RAW = Symbol("mqgw.amqp.raw");

interface MessageModule {
  decode(buffer: Buffer): unknown;
}

interface SessionPrototype {
  on_attach(this: SessionForAttach, frame: AttachFrame): void;
  on_transfer(this: SessionForTransfer, frame: TransferFrame): void;
}
interface SessionForTransfer {
  connection: { is_server?: boolean; _register(): void };
  incoming: { next_transfer_id: number; next_delivery_id: number | undefined };
  _get_link(frame: TransferFrame): ReceiverForTransfer;
}
interface ReceiverForTransfer {
  credit: number;
  delivery_count: number;
  issue_flow: boolean;
  state: { local_open: boolean };
  is_remote_open(): boolean;
  _incomplete?: { id: number; frames?: Buffer[]; settled: boolean; remote_settled: boolean } | undefined;
}
interface TransferFrame {
  performative: { delivery_id?: number | null; aborted?: boolean };
}
interface SessionForAttach {
  connection: { is_server?: boolean };
  links: Record<string, LinkForAttach | undefined>;
  remote: { handles: Record<number, unknown> };
  create_sender(name: string): LinkForAttach;
  create_receiver(name: string): LinkForAttach;
}
interface LinkForAttach {
  local: { attach: { name: string } };
  remote: { attach?: unknown };
  on_attach(frame: AttachFrame): void;
}
interface AttachFrame {
  performative: { name: string; role: boolean; handle: number };
}

/** rhea's SaslServer (lib/sasl.js), as far as `on_sasl_init` uses it. */
interface SaslServerForInit {
  mechanisms: Record<string | symbol, unknown>;
  outcome: number | undefined;
  transport: { encode(frame: unknown): void };
  on_sasl_init(frame: { performative: { mechanism?: unknown } }): void;
}

/** Where a connection's mechanisms keep the hook for a mechanism it did not offer. */
const UNOFFERED = Symbol("mqgw.amqp.unoffered");
/** SASL outcome code `auth` (part 5, 5.3.3.6). */
const SASL_AUTH = 1;

/**
 * Process-wide changes to rhea, for the gateway's side of a connection:
 *
 * - rhea decodes each incoming message (lib/session.js -> message.decode) and drops its
 *   bytes. The gateway forwards the sender's own encoded sections (amqpBody.ts), so it
 *   keeps the bytes and decodes nothing: rhea calls decode for no other purpose.
 * - rhea finds a link by its name alone (Session.on_attach), but a name identifies a link
 *   together with its direction (part 2, 2.6.1): Qpid Proton names a sender and a
 *   receiver on one address alike, and rhea would take the second attach for a repeat of
 *   the first. On a server every attach is the client's, so each gets its own link.
 *
 * - rhea ignores a transfer's `aborted` flag (lib/session.js Incoming.on_transfer) and
 *   hands the partial message on as a whole one. See `onAbortedTransfer`.
 * - rhea answers a SASL mechanism it was not given by itself and tells nobody. See
 *   `patchSaslInit`.
 * - rhea writes each transfer through its general composite encoder. See rheaFrames.ts.
 * - rhea arms its heartbeat timers on output to a socket that is already gone. See
 *   `outputWhileOpen` (rheaPatches.ts).
 * - rhea reads every empty list as one array shared process-wide. See rheaPatches.ts.
 *
 * Fine in the gateway, which never uses rhea as a client.
 */
export function installServerPatches(): void {
  // Installed once: the session's on_attach is ours from then on.
  if (sessionModule.prototype.on_attach === onAttach) return;
  (rhea.message as unknown as MessageModule).decode = decodeKeepingBytes;
  sessionModule.prototype.on_attach = onAttach;
  patchSaslInit();
  sessionModule.prototype.on_transfer = onTransfer;
  outputWhileOpen();
  freshEmptyList();
  installFramePatches();
}

/** Replaces lib/message.js `decode`: the message stays its bytes (rawOf). */
const decodeKeepingBytes = (buffer: Buffer) => ({ [RAW]: buffer });

const originalOnAttach = sessionModule.prototype.on_attach;
/** Replaces lib/session.js `Session.prototype.on_attach` (its body for a client; for a server, a link per name and direction). */
const onAttach: SessionPrototype["on_attach"] = function (frame) {
  if (!this.connection.is_server) return originalOnAttach.call(this, frame);
  const { name, role, handle } = frame.performative;
  // role true: the client receives, so the gateway's end is a sender.
  const key = `${name}\u0000${role ? "sender" : "receiver"}`;
  let link = this.links[key];
  if (!link) {
    link = role ? this.create_sender(key) : this.create_receiver(key);
    link.local.attach.name = name;
  }
  this.remote.handles[handle] = link;
  link.on_attach(frame);
  link.remote.attach = frame.performative;
};

const originalOnTransfer = sessionModule.prototype.on_transfer;
/** Wraps lib/session.js `Session.prototype.on_transfer`: an aborted transfer on a server goes to onAbortedTransfer. */
const onTransfer: SessionPrototype["on_transfer"] = function (frame) {
  if (!this.connection.is_server || frame.performative.aborted !== true || !onAbortedTransfer(this, frame))
    originalOnTransfer.call(this, frame);
};

/**
 * Re-implements the bookkeeping of lib/session.js `Incoming.on_transfer` for an aborted
 * transfer. Part 2, 2.7.5: an aborted delivery is discarded (the aborting frame's payload too) and
 * is implicitly settled, so it gets no disposition. It still used a delivery-id and the
 * link credit it was sent on (2.6.7), so the delivery-count moves on; the gateway gives
 * that credit back at once with a flow, as nothing of it is in flight. False: not an
 * abort rhea's bookkeeping can take (a transfer after detach, a wrong delivery-id), left
 * to rhea, which treats it as the protocol error it is.
 */
function onAbortedTransfer(session: SessionForTransfer, frame: TransferFrame): boolean {
  const receiver = session._get_link(frame);
  if (!receiver.is_remote_open()) return false;
  const incoming = session.incoming;
  const id = frame.performative.delivery_id;
  const partial = receiver._incomplete;
  if (partial) {
    if (id !== undefined && id !== null && id !== partial.id) return false;
    receiver._incomplete = undefined;
    // Settled on both ends: rhea drops it from the session's window without a disposition.
    partial.frames = [];
    partial.settled = true;
    partial.remote_settled = true;
  } else {
    // Aborted in its first frame: only the delivery-id is used up.
    if (incoming.next_delivery_id === undefined && typeof id === "number") incoming.next_delivery_id = id;
    if (incoming.next_delivery_id === undefined || id !== incoming.next_delivery_id) return false;
    incoming.next_delivery_id++;
  }
  incoming.next_transfer_id++;
  if (receiver.credit > 0) {
    // Used and given back: the credit stays, the count says the delivery happened.
    receiver.delivery_count++;
    if (receiver.state.local_open) receiver.issue_flow = true;
  }
  session.connection._register();
  return true;
}

/** The encoded message of a `message` event (format 0), or a raw payload of another format. */
export function rawOf(message: unknown): Buffer | undefined {
  if (Buffer.isBuffer(message)) return message;
  const raw = (message as { [RAW]?: unknown } | null)?.[RAW];
  return Buffer.isBuffer(raw) ? raw : undefined;
}

// -- attach ------------------------------------------------------------------------------

/**
 * rhea answers a client's attach at once (link.on_attach calls open()). Taking the open
 * request back, synchronously in the `*_open` event, lets the actor answer later, once
 * it knows whether the address is good: link.open() then sends the attach.
 */
export function holdAttach(l: Link): void {
  const state = internals(l).state;
  if (state.open_requests > 0) state.open_requests--;
  state.local_open = false;
}

export interface LocalAttach {
  readonly source?: Record<string, unknown> | null;
  readonly target?: Record<string, unknown> | null;
  readonly sndSettleMode?: 0 | 1 | 2;
  readonly rcvSettleMode?: 0 | 1;
  readonly maxMessageSize?: number;
}

/** Fills the gateway's attach (before open()); a null terminus is how a refusal is spelt. */
export function setLocalAttach(l: Link, a: LocalAttach): void {
  if (a.source) l.set_source(a.source as never);
  if (a.target) l.set_target(a.target as never);
  const attach = internals(l).local.attach;
  if (a.sndSettleMode !== undefined) attach.snd_settle_mode = a.sndSettleMode;
  if (a.rcvSettleMode !== undefined) attach.rcv_settle_mode = a.rcvSettleMode;
  if (a.maxMessageSize !== undefined) attach.max_message_size = a.maxMessageSize;
}

// -- credit, as the gateway's sender sees it ------------------------------------------------

/**
 * Transfers handed to rhea that it has not written yet. rhea takes credit off a sender
 * only when it writes (Outgoing.process), so `credit` alone would let the gateway queue
 * ahead of the client's credit without bound.
 */
export function unsentTransfers(sender: Sender): number {
  const out = internals(sender).session.outgoing;
  let n = 0;
  for (let id = out.next_pending_delivery; id < out.next_delivery_id; id++) {
    if (out.deliveries.by_id(id)?.link === sender) n++;
  }
  return n;
}

/** The client's credit on a link as rhea last computed it (its typings leave `credit` out). */
export function creditOf(l: Link): number {
  return internals(l).credit;
}

/** Credit left for new transfers, and room in the session's delivery buffer. */
export function sendableCount(sender: Sender): number {
  const i = internals(sender);
  return Math.max(0, Math.min(i.credit - unsentTransfers(sender), i.session.outgoing.deliveries.available()));
}

/**
 * Ends a drain (part 2, 2.6.7), borrowing lib/link.js `Sender._get_drain` for one
 * lib/session.js `_write_flow`: the flow back carries drain=true, with any unused credit
 * consumed. rhea does the first case; with no credit left it writes no drain flag at
 * all, and a client waiting for "drained" would wait forever, so that flow is written here.
 * Call only when unsentTransfers is 0, or the flow would overtake the transfers.
 */
export function completeDrain(sender: Sender): void {
  const i = internals(sender);
  if (i.credit > 0) {
    sender.set_drained(true);
    return;
  }
  const original = i._get_drain;
  i._get_drain = () => true;
  try {
    i.session._write_flow(sender);
  } finally {
    i._get_drain = original;
  }
}

// -- multi-frame transfers, as the gateway's receiver sees them ---------------------------

/** Bytes of a delivery still arriving in several frames (rhea keeps them in `_incomplete`). */
export function incompleteBytes(receiver: Receiver): number {
  const frames = internals(receiver)._incomplete?.frames;
  if (!frames) return 0;
  let n = 0;
  for (const f of frames) n += f.length;
  return n;
}

/** Lets go of a partial delivery's frames: a client that goes on sending it costs nothing. */
export function dropIncomplete(receiver: Receiver): void {
  const partial = internals(receiver)._incomplete;
  if (partial?.frames) partial.frames.length = 0;
}

// -- the server side -----------------------------------------------------------------------

/**
 * Wraps lib/connection.js `Connection.prototype.input` on one connection: puts `screen` in front of rhea's parser (Connection.input, which accept() binds to the
 * socket's data events): a chunk it refuses never reaches rhea. `after` runs once rhea
 * has read a chunk.
 */
export function screenInput(conn: Connection, screen: (chunk: Buffer) => boolean, after: () => void): void {
  const c = conn as unknown as { input(chunk: Buffer): void };
  const input = c.input.bind(conn);
  c.input = (chunk: Buffer) => {
    if (!screen(chunk)) return;
    input(chunk);
    after();
  };
}

/**
 * Replaces lib/sasl.js `Server.prototype.on_sasl_init` (calling it for offered mechanisms).
 * rhea's SaslServer answers a mechanism it has no factory for with the `auth` outcome
 * and tells nobody, and looks the name up through the prototype chain (its default
 * mechanisms object has `enable_plain` there). On a server whose mechanisms carry the
 * UNOFFERED hook, a name that is not an offered mechanism gets the same `auth` outcome
 * and the hook is told, so the connection can cut off a client that stays.
 */
function patchSaslInit(): void {
  const sasl = saslModule;
  const frames = req("rhea/lib/frames.js") as {
    sasl_frame(p: unknown): unknown;
    sasl_outcome(fields: { code: number }): unknown;
  };
  const original = sasl.Server.prototype.on_sasl_init;
  sasl.Server.prototype.on_sasl_init = function (frame) {
    const hook = this.mechanisms[UNOFFERED] as ((name: string) => void) | undefined;
    const name = frame.performative.mechanism;
    if (!hook || (typeof name === "string" && Object.hasOwn(this.mechanisms, name))) {
      original.call(this, frame);
      return;
    }
    this.outcome = SASL_AUTH;
    this.transport.encode(frames.sasl_frame(frames.sasl_outcome({ code: SASL_AUTH })));
    hook(String(name));
  };
}

/** A SASL mechanism object as rhea's SaslServer drives it (lib/sasl.js). */
export interface ServerMechanism {
  outcome: boolean | undefined;
  username: string | undefined;
  start(response: Buffer | undefined, hostname?: string): Promise<void> | void;
}

/**
 * A container per connection: rhea looks its SASL mechanisms up on the container, and
 * each connection's mechanisms answer to that connection's own actor.
 */
export function serverContainer(
  id: string,
  mechanisms: Record<string, () => ServerMechanism>,
  unoffered?: (mechanism: string) => void,
): Container {
  const container = rhea.create_container({ id });
  const own = container.sasl_server_mechanisms as Record<string | symbol, unknown>;
  Object.assign(own, mechanisms);
  // A symbol key: rhea lists the offered mechanisms with getOwnPropertyNames, which skips it.
  if (unoffered) own[UNOFFERED] = unoffered;
  return container;
}

// -- what rhea keeps of the peer's and its own performatives ----------------------------------

/** The handle of the client's attach (rhea keeps the attach performative in `remote.attach`). */
export function remoteHandleOf(link: Sender | Receiver): number {
  return (link as unknown as { remote?: { attach?: { handle?: number } } }).remote?.attach?.handle ?? 0;
}

/** The client's detach said closed=true (`remote.detach`): it ends the subscription (a detach with closed=false keeps it). */
export function closedByClient(link: Sender): boolean {
  return (link as unknown as { remote?: { detach?: { closed?: boolean } } }).remote?.detach?.closed === true;
}

/** The link name of the client's attach (rhea's own name for the link carries the direction too: onAttach). */
export function linkNameOf(link: Sender): string {
  return (link as unknown as { remote?: { attach?: { name?: string } } }).remote?.attach?.name ?? link.name;
}

/** The id of the first delivery rhea has not yet written on the link's session (`session.outgoing.next_pending_delivery`). */
export function nextPendingDeliveryOf(link: Sender): number {
  return internals(link).session.outgoing.next_pending_delivery;
}

/**
 * The gateway's begin answers the client's on the next tick (rhea writes it in
 * Session._process); setting `local.begin.handle_max` in the `session_open` event puts
 * the session's link limit in that begin (part 2, 2.5.6).
 */
export function advertiseHandleMax(session: Session, maxLinks: number): void {
  const local = (session as unknown as { local?: { begin?: { handle_max?: number } } }).local;
  if (local?.begin) local.begin.handle_max = maxLinks - 1;
}

/** The channel of the client's begin (`remote.channel`). */
export function remoteChannelOf(session: Session): number {
  return (session as unknown as { remote?: { channel?: number } }).remote?.channel ?? -1;
}

/** rhea's AMQP type system (`rhea.types`), as far as its typings leave it out. */
export interface AmqpTypes {
  Reader: new (b: Buffer) => { position: number; read(): unknown };
  Writer: new () => { write(o: unknown): void; toBuffer(): Buffer };
  wrap_ulong(n: number): unknown;
  wrap_uint(n: number): unknown;
  wrap_boolean(b: boolean): unknown;
  wrap_binary(b: Buffer): unknown;
  wrap_list(items: unknown[]): unknown;
  described(descriptor: unknown, value: unknown): unknown;
  Null(): unknown;
}
export const amqpTypes = rhea.types as unknown as AmqpTypes;

export type { Connection };
