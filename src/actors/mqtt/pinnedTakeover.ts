import { type ConsumerConfig, JetStreamApiError, type JetStreamManager } from "@nats-io/jetstream";
import type { Logger } from "../../log.js";
import { pinnedIdOf, takeoverSteps } from "../../protocol/consumerTakeover.js";
import { missingPermission } from "../client/missingPermission.js";

/**
 * A session's consumer kept across its connections (docs/decisions/consumer-takeover.md).
 * Each consumer is pinned_client in one priority group: the server serves only the reader it
 * pinned. A resume sends UNPIN, which fences every older reader's waiting pull (423 at the
 * next delivery, whatever still listens on its inbox), then RESET, which rewinds to the ack
 * floor, and only then its first pull: the server pins it and hands it, in stream order,
 * everything above the floor (what an older reader held unacknowledged at once, not after
 * the ack wait). A pull sent before the RESET would be given newer messages first. Two API
 * requests and no second consumer, where a new consumer per resume cost a create and a
 * delete (the delete grows with the stream's other consumers: 150-600 ms at 200-900).
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

/**
 * Fences older readers and rewinds to the ack floor, as far as the consumer's state needs
 * it (src/protocol/consumerTakeover.ts); the new reader pulls once this is done. False: the
 * consumer has no pin group (an older gateway made it), so it is replaced the old way.
 */
export async function takeOver(jsm: JetStreamManager, stream: string, consumer: string): Promise<boolean> {
  const info = await jsm.consumers.info(stream, consumer);
  if (!(info.config.priority_groups ?? []).includes(PIN_GROUP)) return false;
  const steps = takeoverSteps({
    pinnedId: pinnedIdOf(info, PIN_GROUP),
    waiting: info.num_waiting,
    ackPending: info.num_ack_pending,
  });
  if (steps === "none") return true;
  await jsm.consumers.unpin(stream, consumer, PIN_GROUP);
  if (steps === "unpin_reset") await jsm.consumers.reset(stream, consumer);
  return true;
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
