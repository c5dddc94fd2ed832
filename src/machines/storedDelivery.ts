import { assign, emit, setup } from "xstate";

/**
 * The stored part of one QoS 1/2 subscription of a persistent MQTT session: the durable
 * consumer it reads (docs/decisions/mqtt-store.md). Reading the store can fail for a
 * while (a JetStream timeout, no responders, a leader election, a consumer lost with a
 * node, the consumer limit): the subscription then waits, and asks again after a bounded,
 * jittered backoff, for as long as it lives, while its live (QoS 0) messages keep
 * flowing. When the store answers it reads from the session's floor, so nothing
 * acknowledged to a publisher is skipped. Only a refusal that waiting cannot cure (the
 * gateway user may not read it, no MQTT store configured) ends it.
 *
 * A resume takes the session's consumer over in place where the server allows it; a reopen
 * after a consumer was lost (or a resume on an older server) makes one of its own, and the
 * ones it replaces are deleted, retried the same way, so none is left behind while the
 * subscription lives.
 *
 * When its connection ends with nothing unacknowledged, a reading subscription of a session
 * that lives on is parked: it asks for nothing more, holds what its pulls under way still
 * bring, and keeps the consumer's pin if the server gave it one, for `parkMs` (less than the
 * pin's priority timeout).
 * A resume here within that time adopts it and reads on with no JetStream request
 * (docs/decisions/session-parking.md); otherwise it stops as any other, and the resume takes
 * the consumer over (UNPIN, RESET).
 *
 * A takeover that left messages waiting, or found an older reader's pull still waiting,
 * watches for a while that the server pins this reader: a pull of an earlier connection
 * (a parked reader's elsewhere) may be pinned by the takeover's messages or the next one
 * published, before this reader's first pull is queued, and would keep it waiting for the
 * pin's priority_timeout (docs/decisions/consumer-takeover.md). Each look that finds the pin left
 * over hands it back (RESET, UNPIN); the looks are bounded, after which the timeout bounds
 * what is left.
 */
export type StoredDeliveryEvent =
  /** `awaitPin`: taken over in place, and messages wait for this reader or an older reader's pull still waited. */
  | { type: "OPENED"; awaitPin?: boolean }
  /** The reader holds the pin (or something it received), or nothing waits for it elsewhere. */
  | { type: "SERVED" }
  /** Not pinned yet while messages wait, or the look was not answered: look again later. */
  | { type: "PIN_UNKNOWN" }
  /**
   * The pin is with another (a pull that went), or what waits went unacknowledged to one:
   * `rewind` (RESET) hands back what went, then `unpin` frees the pin for this reader.
   */
  | { type: "PIN_LEFT_OVER"; rewind: boolean; unpin: boolean }
  | { type: "RETAKEN" }
  | { type: "RETAKE_FAILED" }
  /** `refused`: no wait can help (`permission`: the gateway user may not read it; configuration). */
  /** `limit`: a JetStream limit (the stream's max_consumers) refused it. */
  | { type: "OPEN_FAILED"; reason: string; refused: boolean; permission: boolean; limit: boolean; jitter: number }
  /** The consumer it read is gone (deleted, lost with a node): read again from the floor. */
  | { type: "CONSUMER_LOST"; reason: string; jitter: number }
  /** Consumers of earlier incarnations are waiting to be deleted. */
  | { type: "RETIRE" }
  | { type: "RETIRED" }
  | { type: "RETIRE_FAILED"; jitter: number }
  /** The connection ended with nothing unacknowledged; the session lives on. */
  | { type: "PARK" }
  /**
   * A resume here took it over: it reads for the new connection. `awaitPin`: never pinned,
   * and an older reader's pull its own takeover found may still wait (and take the pin).
   */
  | { type: "ADOPT"; awaitPin?: boolean }
  | { type: "STOP" };

export type StoredDeliveryEmitted =
  /** Open (or reopen) the consumer from the session's floor; answer OPENED or OPEN_FAILED. */
  | { type: "open" }
  | { type: "waiting"; reason: string; attempt: number; limit: boolean }
  | { type: "refused"; reason: string; permission: boolean }
  | { type: "reading" }
  /** Stop reading the consumer that is gone (its pulls), keeping what the client holds. */
  | { type: "drop_reader" }
  /** Delete the consumers retired so far; answer RETIRED (all gone) or RETIRE_FAILED. */
  | { type: "retire" }
  /** Look whether the server pinned this reader; answer SERVED, PIN_UNKNOWN or PIN_LEFT_OVER. */
  | { type: "check_pin" }
  /** Hand the left-over pin back; answer RETAKEN or RETAKE_FAILED. */
  | { type: "retake"; rewind: boolean; unpin: boolean }
  | { type: "stop" };

export interface StoredDeliveryInput {
  /** The first wait after a failure; each further one doubles, up to `maxBackoffMs`. */
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
  /** How long a parked subscription waits for a resume before it stops. */
  readonly parkMs?: number;
  /** After a takeover, the first look at the pin; each further one waits twice as long. */
  readonly pinCheckMs?: number;
  /** How many looks at most. */
  readonly pinChecks?: number;
}

/** Looks at the pin after 1, 2, 4 and 8 s: past an earlier connection's pulls (10 s) and well before the pin's 30 s. */
export const PIN_CHECK_MS = 1_000;
export const PIN_CHECKS = 4;

interface Context extends StoredDeliveryInput {
  /**
   * The draw (0 <= jitter < 1) that came with the failure the wait follows: the edge draws
   * it, so a step is a function of its snapshot and event alone, and a step taken once may be
   * reused by every reader in the same place (stepMemo.ts) without handing them one delay.
   */
  jitter: number;
  attempt: number;
  /** Looks at the pin so far since the takeover. */
  pinCheck: number;
  retireAttempt: number;
  reason: string;
}

/** The n-th wait (n from 1): doubling steps up to the cap, each jittered down by up to half (0 <= jitter < 1). */
export function backoff(context: StoredDeliveryInput, n: number, jitter: number): number {
  const step = Math.min(context.maxBackoffMs, context.backoffMs * 2 ** Math.min(n - 1, 20));
  return Math.round(step * (0.5 + 0.5 * jitter));
}

export const storedDeliveryMachine = setup({
  types: {
    context: {} as Context,
    events: {} as StoredDeliveryEvent,
    emitted: {} as StoredDeliveryEmitted,
    input: {} as StoredDeliveryInput,
  },
  delays: {
    retry: ({ context }) => backoff(context, context.attempt, context.jitter),
    retryRetire: ({ context }) => backoff(context, context.retireAttempt, context.jitter),
    parkGrace: ({ context }) => context.parkMs ?? 0,
    pinCheck: ({ context }) => (context.pinCheckMs ?? PIN_CHECK_MS) * 2 ** context.pinCheck,
  },
  guards: {
    awaitsPin: ({ event }) => (event.type === "OPENED" || event.type === "ADOPT") && event.awaitPin === true,
    pinChecksLeft: ({ context }) => context.pinCheck + 1 < (context.pinChecks ?? PIN_CHECKS),
  },
  actions: {
    lookAgain: assign({ pinCheck: ({ context }) => context.pinCheck + 1 }),
  },
}).createMachine({
  id: "storedDelivery",
  context: ({ input }) => ({ ...input, jitter: 0, attempt: 0, pinCheck: 0, retireAttempt: 0, reason: "" }),
  initial: "active",
  states: {
    active: {
      type: "parallel",
      on: { STOP: { target: "stopped" } },
      states: {
        read: {
          initial: "opening",
          states: {
            opening: {
              entry: emit({ type: "open" }),
              on: {
                OPENED: [
                  {
                    guard: "awaitsPin",
                    target: "reading.awaitingPin",
                    actions: assign({ attempt: 0, reason: "", pinCheck: 0, jitter: 0 }),
                  },
                  // Back to the context of a reader that never waited (the wait's draw too), so
                  // readers alike share their steps again after a stall (stepMemo.ts).
                  { target: "reading", actions: assign({ attempt: 0, reason: "", jitter: 0 }) },
                ],
                OPEN_FAILED: [
                  {
                    guard: ({ event }) => event.refused,
                    target: "refused",
                    actions: emit(({ event }) => ({
                      type: "refused" as const,
                      reason: event.reason,
                      permission: event.permission,
                    })),
                  },
                  {
                    target: "waiting",
                    actions: [
                      assign({
                        attempt: ({ context }) => context.attempt + 1,
                        reason: ({ event }) => event.reason,
                        jitter: ({ event }) => event.jitter,
                      }),
                      emit(({ context, event }) => ({
                        type: "waiting" as const,
                        reason: event.reason,
                        attempt: context.attempt,
                        limit: event.limit,
                      })),
                    ],
                  },
                ],
              },
            },
            // The store did not answer: asked again after the backoff; live messages still flow.
            waiting: {
              tags: ["waiting"],
              after: { retry: { target: "opening" } },
            },
            reading: {
              // Asked of each reader at its connection's end (storedDelivery.ts `park`).
              tags: ["reading"],
              entry: emit({ type: "reading" }),
              initial: "settled",
              states: {
                // Nothing to watch (a new consumer, an adopted one, a takeover with nothing
                // waiting), pinned, or the looks used up: the pin's priority_timeout bounds the rest.
                settled: {},
                // Taken over with messages waiting or an older pull waiting: the server should pin this reader.
                awaitingPin: {
                  after: { pinCheck: { target: "checkingPin" } },
                },
                checkingPin: {
                  entry: emit({ type: "check_pin" }),
                  on: {
                    SERVED: { target: "settled" },
                    PIN_UNKNOWN: [
                      { guard: "pinChecksLeft", target: "awaitingPin", actions: "lookAgain" },
                      { target: "settled" },
                    ],
                    PIN_LEFT_OVER: {
                      target: "retaking",
                      actions: emit(({ event }) => ({
                        type: "retake" as const,
                        rewind: event.rewind,
                        unpin: event.unpin,
                      })),
                    },
                  },
                },
                // Handing the pin back (RESET, UNPIN); looked at again after the next wait: a
                // pull of an earlier connection still waiting (up to 10 s) may be pinned again.
                retaking: {
                  on: {
                    RETAKEN: [
                      { guard: "pinChecksLeft", target: "awaitingPin", actions: "lookAgain" },
                      { target: "settled" },
                    ],
                    RETAKE_FAILED: [
                      { guard: "pinChecksLeft", target: "awaitingPin", actions: "lookAgain" },
                      { target: "settled" },
                    ],
                  },
                },
              },
              on: {
                PARK: { target: "parked" },
                CONSUMER_LOST: {
                  target: "waiting",
                  actions: [
                    assign({ attempt: 1, reason: ({ event }) => event.reason, jitter: ({ event }) => event.jitter }),
                    emit({ type: "drop_reader" }),
                    emit(({ event }) => ({ type: "waiting" as const, reason: event.reason, attempt: 1, limit: false })),
                  ],
                },
              },
            },
            // No connection reads it: a resume here adopts it within parkGrace, or it stops.
            parked: {
              tags: ["parked"],
              on: {
                ADOPT: [
                  { guard: "awaitsPin", target: "reading.awaitingPin", actions: assign({ pinCheck: 0 }) },
                  { target: "reading" },
                ],
                // Gone, or taken over elsewhere: the next resume takes the consumer over.
                CONSUMER_LOST: { target: "#storedDelivery.stopped" },
              },
              after: { parkGrace: { target: "#storedDelivery.stopped" } },
            },
            // The subscription goes on live only (a resume) or is refused (a SUBSCRIBE).
            refused: { type: "final" },
          },
        },
        // Consumers of earlier incarnations: deleted, and tried again until they are.
        retire: {
          initial: "idle",
          states: {
            idle: { on: { RETIRE: { target: "deleting" } } },
            deleting: {
              entry: emit({ type: "retire" }),
              on: {
                RETIRED: { target: "idle", actions: assign({ retireAttempt: 0, jitter: 0 }) },
                RETIRE_FAILED: {
                  target: "backingOff",
                  actions: assign({
                    retireAttempt: ({ context }) => context.retireAttempt + 1,
                    jitter: ({ event }) => event.jitter,
                  }),
                },
              },
            },
            backingOff: {
              after: { retryRetire: { target: "deleting" } },
            },
          },
        },
      },
    },
    stopped: {
      type: "final",
      entry: emit({ type: "stop" }),
    },
  },
});
