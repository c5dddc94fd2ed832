import { type ConsumerConfig, JetStreamApiError, type JetStreamManager } from "@nats-io/jetstream";
import type { Logger } from "../../log.js";
import type { StoredDeliveryEvent } from "../../machines/storedDelivery.js";
import { pinnedIdOf, takeoverSteps } from "../../protocol/consumerTakeover.js";
import { missingPermission } from "../client/missingPermission.js";
import type { OpenOptions } from "./storedDeliveryOptions.js";

/**
 * A session's consumer kept across its connections (docs/decisions/consumer-takeover.md).
 * Each consumer is pinned_client in one priority group: the server serves only the reader it
 * pinned. A resume asks the consumer's INFO, then, as its state calls for them, UNPIN, which
 * fences every older reader's waiting pull (423 at the next delivery, whatever still listens
 * on its inbox), and RESET, which rewinds to the ack floor, and only then its first pull:
 * the server pins it and hands it, in stream order, everything above the floor (what an
 * older reader held unacknowledged at once, not after the ack wait). A pull sent before the
 * RESET would be given newer messages first. At most three API requests and no second
 * consumer, where a new consumer per resume cost a create and a delete (the delete grows
 * with the stream's other consumers: 150-600 ms at 200-900).
 */
export const PIN_GROUP = "mqgw";

/**
 * What makes a new consumer one that a resume can take over in place. A pin whose reader
 * has not pulled for `priority_timeout` is released: a reader that lives pulls every few
 * seconds (and one that only waited is pinned again at its next pull), while a pull that
 * captured the pin and then went (its connection closed during a server stall) would
 * otherwise hold it for nats-server's default of two minutes.
 */
export const PINNED: Pick<ConsumerConfig, "priority_groups" | "priority_policy" | "priority_timeout"> = {
  priority_groups: [PIN_GROUP],
  priority_policy: "pinned_client",
  priority_timeout: 30_000_000_000,
};

/** pinned_client came with nats-server 2.11, consumer reset with 2.14: both are needed. */
export function takesOverInPlace(serverVersion: string | undefined): boolean {
  const m = /^v?(\d+)\.(\d+)/.exec(serverVersion ?? "");
  if (!m) return false;
  const [major, minor] = [Number(m[1]), Number(m[2])];
  return major > 2 || (major === 2 && minor >= 14);
}

/**
 * JetStream's answer that the consumer cannot be taken over in place: it is gone (10014), or
 * it has no such priority group (10160: an older gateway made it unpinned). Any other answer
 * (a cluster without a leader now, a timeout) is waited out like every failed attempt: taking
 * the old way then would make a second consumer where the first may only be unreachable.
 */
export function notInPlace(e: unknown): boolean {
  return e instanceof JetStreamApiError && (e.code === 10014 || e.code === 10160);
}

/** What a takeover in place left for its reader to watch (the storedDelivery machine's `awaitingPin`). */
export interface TakenOver {
  /**
   * Watch that the server pins the new reader: messages wait after a RESET, or a pull of an
   * older reader was still heard at the INFO (a parked reader's, on the gateway the session
   * left). Either can be given the pin before the new reader's first pull is queued.
   */
  readonly watchPin: boolean;
  /**
   * A pull of an older reader was still heard at the INFO. RESET does not end waiting pulls:
   * until it expires (PULL_EXPIRES_MS), the next message published may pin it, even when
   * nothing waited at the takeover.
   */
  readonly olderPulls: boolean;
}

/**
 * Fences older readers and rewinds to the ack floor, as far as the consumer's state needs
 * it (src/protocol/consumerTakeover.ts); the new reader pulls once this is done. Undefined:
 * the consumer has no pin group (an older gateway made it), so it is replaced the old way.
 * With no pull waiting at the INFO (which drops those nobody hears) and nothing waiting
 * after it, there is nothing to watch.
 */
export async function takeOver(
  jsm: JetStreamManager,
  stream: string,
  consumer: string,
): Promise<TakenOver | undefined> {
  const info = await jsm.consumers.info(stream, consumer);
  if (!(info.config.priority_groups ?? []).includes(PIN_GROUP)) return undefined;
  const steps = takeoverSteps({
    pinnedId: pinnedIdOf(info, PIN_GROUP),
    waiting: info.num_waiting,
    ackPending: info.num_ack_pending,
  });
  const olderPulls = info.num_waiting > 0;
  if (steps === "none") return { watchPin: false, olderPulls };
  await jsm.consumers.unpin(stream, consumer, PIN_GROUP);
  if (steps === "unpin") return { watchPin: olderPulls, olderPulls };
  const r = await jsm.consumers.reset(stream, consumer);
  return { watchPin: olderPulls || r.num_pending > 0 || r.num_ack_pending > 0, olderPulls };
}

/** Where a taken-over consumer is (a stored delivery's options). */
type Where = Pick<OpenOptions, "services" | "account" | "stream"> & { readonly log?: Logger | undefined };

/**
 * A reader that took its consumer over, with messages waiting, and was not served
 * (storedDelivery machine, `awaitingPin`). nats-server pins the first pull without an id it
 * finds waiting when it has a message to deliver, and only then looks whether its inbox is
 * still heard (consumer.go, nextWaiting): a pull of an earlier connection whose inbox went
 * is pinned and dropped, and the pin stays with nobody; one still heard (a `>` subscriber, an
 * inbox draining) is pinned and sent the message, which nobody acknowledges. Either way this
 * reader's pulls, which carry no id, wait for the pin's priority_timeout. Nothing waiting
 * and nothing unacknowledged: nothing is kept from it (a reader elsewhere that holds the
 * pin read it all), left alone once no older reader's pull can still be waiting.
 */
export async function checkPin(
  w: Where,
  consumer: string,
  served: () => boolean,
  /** Until then (Date.now()) an older reader's pull may still wait, and pin the next message to come. */
  olderPullsUntil = 0,
): Promise<StoredDeliveryEvent> {
  if (served()) return { type: "SERVED" };
  try {
    const { jsm } = await w.services.jetstream(w.account);
    const info = await jsm.consumers.info(w.stream, consumer);
    const pinned = pinnedIdOf(info, PIN_GROUP) !== undefined;
    const unacknowledged = info.num_ack_pending > 0;
    if (served()) return { type: "SERVED" };
    if (!unacknowledged && info.num_pending === 0)
      return Date.now() < olderPullsUntil ? { type: "PIN_UNKNOWN" } : { type: "SERVED" };
    if (!pinned && !unacknowledged) return { type: "PIN_UNKNOWN" };
    return { type: "PIN_LEFT_OVER", rewind: unacknowledged, unpin: pinned };
  } catch {
    return { type: "PIN_UNKNOWN" };
  }
}

/**
 * Hands a left-over pin back. RESET first: while another holds the pin, this reader (no id)
 * is given nothing, so what went unacknowledged comes back, from the floor, only after the
 * UNPIN, to this reader, in stream order (an UNPIN first would let newer messages reach it
 * before the RESET hands back older ones). No UNPIN once this reader is served: a reader
 * without a pin id cannot hold the pin, so until then the UNPIN frees only another's.
 */
export async function retakePin(
  w: Where,
  consumer: string,
  served: () => boolean,
  how: { rewind: boolean; unpin: boolean },
): Promise<StoredDeliveryEvent> {
  try {
    const { jsm } = await w.services.jetstream(w.account);
    if (how.rewind && !served()) await jsm.consumers.reset(w.stream, consumer);
    if (how.unpin && !served()) await jsm.consumers.unpin(w.stream, consumer, PIN_GROUP);
    w.log?.info({ stream: w.stream, consumer, ...how }, "a takeover's pin was left to a pull that went: handed back");
    return { type: "RETAKEN" };
  } catch {
    return { type: "RETAKE_FAILED" };
  }
}

const refusedStreams = new Set<string>();

/** Said once per stream: the gateway user may not UNPIN or RESET there, so resumes make a new consumer. */
export function inPlaceRefused(log: Logger | undefined, stream: string, e: unknown): void {
  if (refusedStreams.has(stream)) return;
  refusedStreams.add(stream);
  const missing = missingPermission(e);
  log?.warn(
    { stream, missing_permission: missing },
    "the gateway user may not take consumers over in place (UNPIN, RESET): each resume makes a new consumer and deletes the old; mq-gateway generate's permissions allow it",
  );
}
