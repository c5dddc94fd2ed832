/**
 * What the gateway needs from rhea beyond its public API, in one place. rhea is written
 * for clients; as a server it answers every attach at once, decodes every message into
 * JavaScript values, and lets the sender's queue run ahead of credit. Each function here
 * names the rhea internal it relies on (rhea 3.0.x), so an upgrade is checked here.
 */
import rhea, { type Connection, type Container, type link as Link, type Receiver, type Sender } from "rhea";

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
  local: { attach: { snd_settle_mode?: number; rcv_settle_mode?: number; max_message_size?: number; source?: unknown; target?: unknown } };
  credit: number;
  _incomplete?: { frames?: Buffer[] };
  _get_drain(): boolean;
}

const internals = (l: Link) => l as unknown as LinkInternals;

// -- messages as bytes ---------------------------------------------------------------

const RAW = Symbol("mqgw.amqp.raw");

interface MessageModule {
  decode(buffer: Buffer): unknown;
}

let rawInstalled = false;

/**
 * rhea decodes each incoming message (lib/session.js -> message.decode) and drops its
 * bytes. The gateway forwards the sender's own encoded sections (amqpBody.ts), so it
 * keeps the bytes instead and decodes nothing: rhea calls decode for no other purpose.
 * Process-wide, which is fine in the gateway: it never receives as an rhea client.
 */
export function keepRawMessages(): void {
  if (rawInstalled) return;
  rawInstalled = true;
  (rhea.message as unknown as MessageModule).decode = (buffer: Buffer) => ({ [RAW]: buffer });
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

/** Credit left for new transfers, and room in the session's delivery buffer. */
export function sendableCount(sender: Sender): number {
  const i = internals(sender);
  return Math.max(0, Math.min(i.credit - unsentTransfers(sender), i.session.outgoing.deliveries.available()));
}

/**
 * Ends a drain (part 2, 2.6.7): the flow back carries drain=true, with any unused credit
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
export function serverContainer(id: string, mechanisms: Record<string, () => ServerMechanism>): Container {
  const container = rhea.create_container({ id });
  Object.assign(container.sasl_server_mechanisms as object, mechanisms);
  return container;
}

export type { Connection };
