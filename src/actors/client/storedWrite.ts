import { type MsgHdrs, NoRespondersError, TimeoutError } from "@nats-io/transport-node";
import type { MessageStore, StoreOutcome } from "../messageStore.js";
import type { Metrics } from "../metrics.js";
import type { NatsSeam } from "./natsSeam.js";
import { type StoredAck, StoredPublisher } from "./storedPublisher.js";

// The stored-write step both doors take for a message that is stored: into the stream a
// binding names (`writeStored`), or as a copy in the MQTT store after the client's core
// publish (`keepCopy`). Each door answers a failure in its own terms (MQTT PUBACK/PUBREC
// reason codes, AMQP outcomes); the header block comes from natsHeaders.ts `headerBlock`.

/**
 * How long a stored QoS 1/2 publish may wait for its stream, from when the gateway read it
 * to its answer (PUBACK/PUBREC, or the refusal: 0x80 with a reason, a close for 3.1.1).
 * docs/decisions/faults.md: a node lost, a stream leader being elected, a nats-server whose
 * JetStream is still loading after a restart all end well inside it.
 */
export const STORED_ANSWER_MS = 30_000;
/** One request's wait for the stream's ack; a lost one is sent again (the same Nats-Msg-Id: stored once). */
export const STORED_ATTEMPT_MS = 5_000;

/**
 * What a stream that is coming back answers: nothing within the attempt (a leader
 * election, a request lost with a node) or, from a server that has JetStream (its INFO
 * says so), "no responders" (JetStream still loading its streams after a restart). From a
 * server without JetStream, "no responders" is the answer; so is anything else (a
 * refusal, a JetStream error).
 */
export function answersLater(e: unknown, nats: NatsSeam): boolean {
  return isTimeout(e) || (isNoResponders(e) && nats.info()?.jetstream === true);
}

/** Nobody took the request: no stream for the subject, or JetStream not (yet) there. */
export function isNoResponders(e: unknown): boolean {
  return causedBy(e, NoRespondersError);
}

/** A wait that ran out: nats.js's own, or the gateway's (which throws nats.js's class too). */
export function isTimeout(e: unknown): boolean {
  return causedBy(e, TimeoutError);
}

/** `e` or its causes is a `kind` ("no responders" reaches the JetStream manager as the cause of "jetstream is not enabled"). */
function causedBy(e: unknown, kind: abstract new (...args: never[]) => Error): boolean {
  for (let c: unknown = e; c instanceof Error; c = (c as Error).cause) if (c instanceof kind) return true;
  return false;
}

/** The pause before asking again after `e`: none after a timeout (it waited already), 250 ms doubling to 2 s after "no responders". */
export function pauseAfter(e: unknown, attempt: number): number {
  return isTimeout(e) ? 0 : Math.min(250 * 2 ** (attempt - 1), 2_000);
}

/**
 * The order of one client's stored publishes per subject (MQTT 4.6: delivered in the order
 * the client sent them). A publish sent again lands in the stream after any later one that
 * got there first, so only the latest publish on its subject is sent again, and later ones
 * on that subject wait until it is answered; an earlier one whose successor is already out
 * is refused instead (an answer that keeps the acknowledged ones in order).
 */
export class PublishOrder {
  private readonly latest = new Map<string, number>();
  private readonly held = new Map<string, Promise<void>>();
  private next = 0;

  /** A publish on `subject` being sent again, which a new one must wait for; usually none. */
  heldBy(subject: string): Promise<void> | undefined {
    return this.held.get(subject);
  }

  /** This publish goes out now: the latest on its subject. */
  take(subject: string): Turn {
    const ticket = ++this.next;
    this.latest.set(subject, ticket);
    return new Turn(this, subject, ticket);
  }

  isLatest(subject: string, ticket: number): boolean {
    return this.latest.get(subject) === ticket;
  }

  hold(subject: string): () => void {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    this.held.set(subject, gate);
    return () => {
      if (this.held.get(subject) === gate) this.held.delete(subject);
      release();
    };
  }

  done(subject: string, ticket: number): void {
    if (this.latest.get(subject) === ticket) this.latest.delete(subject);
  }
}

/** One publish's place in its subject's order. */
export class Turn {
  constructor(
    private readonly order: PublishOrder,
    private readonly subject: string,
    private readonly ticket: number,
  ) {}
  /** Nothing was sent on the subject after it: sending it again cannot overtake anything. */
  mayResend(): boolean {
    return this.order.isLatest(this.subject, this.ticket);
  }
  /** New publishes on the subject wait until the returned release is called. */
  hold(): () => void {
    return this.order.hold(this.subject);
  }
  done(): void {
    this.order.done(this.subject, this.ticket);
  }
}

/**
 * A stored publish sent again, with the same Nats-Msg-Id (the stream keeps it once),
 * until the stream answers or `boundMs` has passed, as long as `turn` allows it (nothing
 * later on its subject went out). Between sends after "no responders", a short pause
 * (250 ms doubling, at most 2 s) so a loading JetStream is not flooded.
 */
export async function publishPatiently(
  nats: NatsSeam,
  publisher: StoredPublisher,
  subject: string,
  payload: Uint8Array,
  headers: MsgHdrs,
  turn: Turn | undefined,
  boundMs = STORED_ANSWER_MS,
): Promise<StoredAck> {
  const deadline = Date.now() + boundMs;
  let release: (() => void) | undefined;
  try {
    for (let attempt = 1; ; attempt++) {
      const left = deadline - Date.now();
      try {
        return await publisher.publishWith(subject, payload, headers, Math.max(1, Math.min(STORED_ATTEMPT_MS, left)));
      } catch (e) {
        // Without a turn (AMQP's store copies) nothing is sent again: one wait, as before.
        if (!answersLater(e, nats) || !turn || (!release && !turn.mayResend())) throw e;
        const pause = pauseAfter(e, attempt);
        if (deadline - Date.now() <= pause) throw e;
        release ??= turn?.hold();
        if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
      }
    }
  } finally {
    release?.();
  }
}

/**
 * A message to a subject a binding stores: the client's own publish (its connection, so
 * its permissions apply) of `headers` (a `headerBlock`: Nats-Msg-Id included, so a resend
 * is stored once) into the stream, settled by the stream's ack. Sent again while the
 * stream is coming back, within `boundMs`, when `turn` allows it (MQTT's publishes, kept in
 * order per subject); without a turn, one wait (AMQP's transfers). The ack's latency is
 * observed. Fails as the publish failed; `AckInboxDenied`: the client may not read the
 * stream's acks, which each door answers as a denial.
 */
export async function writeStored(
  nats: NatsSeam,
  metrics: Metrics,
  subject: string,
  payload: Uint8Array,
  headers: MsgHdrs,
  turn: Turn | undefined,
  boundMs = STORED_ANSWER_MS,
): Promise<StoredAck> {
  const started = performance.now();
  const ack = await publishPatiently(nats, StoredPublisher.of(nats), subject, payload, headers, turn, boundMs);
  metrics.jsAckLatency.observe((performance.now() - started) / 1000);
  return ack;
}

/**
 * A message to a subject no binding stores, once NATS took the client's core publish of it
 * (the door confirms that first: nothing a client may not publish is kept): its copy in the
 * MQTT store (messageStore.ts) with the same header block. The latency from `started` (when
 * the door began) is observed when the account has a store. Fails when a store exists and
 * did not keep the copy.
 */
export async function keepCopy(
  store: MessageStore,
  metrics: Metrics,
  account: string,
  subject: string,
  payload: Uint8Array,
  headers: MsgHdrs,
  turn?: Turn,
  started = performance.now(),
): Promise<StoreOutcome> {
  const kept = await store.write(account, subject, payload, headers, turn);
  if (kept !== "no_store") metrics.jsAckLatency.observe((performance.now() - started) / 1000);
  return kept;
}
