/**
 * What a resume must ask of JetStream before its first pull on a session's pinned consumer
 * (docs/decisions/consumer-takeover.md), read from the consumer's INFO. UNPIN fences an
 * older reader's pulls; RESET hands back at once what was delivered and not acknowledged.
 * Both are needed only when something could still reach or be held by an older reader:
 *
 * - a pull still waiting at the server (its connection may have gone without the server
 *   knowing yet): it could take a redelivered message, or the pin, from the new reader;
 * - messages delivered and not acknowledged: without RESET they come back after ack_wait.
 *
 * With neither, a pin left by an older reader only has to be released (UNPIN), and a
 * consumer with no pin and nothing held is read on as it stands. RESET is the costly request
 * (on nats-server 2.15 about four times an INFO, growing with the stream's consumers), and
 * a fleet's most common resume (a command filter that never delivered, its pulls expired)
 * needs none of them.
 */
export type TakeoverSteps = "none" | "unpin" | "unpin_reset";

/** The parts of a consumer's INFO the decision reads. */
export interface PinnedConsumerState {
  /** The group's pinned client id, if the server pinned a reader (INFO `priority_groups[].pinned_client_id`). */
  readonly pinnedId: string | undefined;
  /** Pull requests waiting at the server (INFO `num_waiting`). */
  readonly waiting: number;
  /** Delivered, not yet acknowledged (INFO `num_ack_pending`). */
  readonly ackPending: number;
}

export function takeoverSteps(s: PinnedConsumerState): TakeoverSteps {
  if (s.waiting > 0 || s.ackPending > 0) return "unpin_reset";
  return s.pinnedId ? "unpin" : "none";
}

/** The pinned client id of `group` in a consumer INFO answer (nats.js does not type `priority_groups` state). */
export function pinnedIdOf(info: object, group: string): string | undefined {
  const state = (info as { readonly priority_groups?: unknown }).priority_groups;
  const groups: unknown[] = Array.isArray(state) ? state : [];
  for (const g of groups) {
    if (g && typeof g === "object" && (g as { group?: unknown }).group === group) {
      const id = (g as { pinned_client_id?: unknown }).pinned_client_id;
      return typeof id === "string" && id !== "" ? id : undefined;
    }
  }
  return undefined;
}
