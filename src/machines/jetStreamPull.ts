import { emit, setup } from "xstate";

/**
 * One reader of a JetStream pull consumer (`$JS.API.CONSUMER.MSG.NEXT`), for either door:
 * an MQTT session's stored subscription (a window of overlapping long polls) and an AMQP
 * receiving link (exactly as far as the client's credit). Each pull, each message and each
 * settlement is the edge's plain work (actors/client/jetStreamPull.ts) while the machine
 * is `pulling`; the machine holds what changes whether and how the consumer is asked:
 * NATS away, a drain, a pull cut short, a consumer that may be gone, the end. What is
 * read and not settled is handed back (a NAK) when it stops.
 */
export type JetStreamPullEvent =
  /** NATS is away: the pulls made are forgotten, nothing is asked until RESUME. */
  | { type: "HOLD" }
  | { type: "RESUME" }
  /** Ask for what is there now and no more (a `no_wait` pull: AMQP drain, part 2, 2.6.7). */
  | { type: "DRAIN" }
  /** The no_wait pull is over. */
  | { type: "DRAINED" }
  /** A pull was cut short at once (409, a limit), could not be sent, or its inbox was refused. */
  | { type: "CUT_SHORT" }
  /** 503 no responders: the consumer may be gone, or JetStream is not up yet. */
  | { type: "NO_RESPONDERS" }
  | { type: "CONSUMER_FOUND" }
  /** 409 consumer deleted, or CONSUMER.INFO said 10014 / 10059. */
  | { type: "CONSUMER_GONE"; reason: string }
  | { type: "STOP" };

export type JetStreamPullEmitted =
  /** End the open pulls: what they would bring is asked for again later. */
  | { type: "forget_pulls" }
  /** Ask again as far as the reader wants (after a pause, on resume). */
  | { type: "ask" }
  | { type: "pull_no_wait" }
  /** A drain is answered: everything there was has been offered. */
  | { type: "drained" }
  | { type: "check_consumer" }
  | { type: "gone"; reason: string }
  /** The pulls' inboxes go at once (the server drops waiting requests nobody reads); what is held goes back. */
  | { type: "stop" };

export interface JetStreamPullInput {
  /** What a gone consumer means: the AMQP link ends (`end`); an MQTT session asks again, in case JetStream is restarting (`retry`). */
  readonly onGone: "end" | "retry";
  /** How long to wait before asking again after a pull was cut short. */
  readonly pauseMs: number;
}

interface Context extends JetStreamPullInput {
  reason: string;
}

export const jetStreamPullMachine = setup({
  types: {
    context: {} as Context,
    events: {} as JetStreamPullEvent,
    emitted: {} as JetStreamPullEmitted,
    input: {} as JetStreamPullInput,
  },
  delays: { pause: ({ context }) => context.pauseMs },
  guards: { retriesGone: ({ context }) => context.onGone === "retry" },
}).createMachine({
  id: "jetStreamPull",
  context: ({ input }) => ({ ...input, reason: "" }),
  initial: "pulling",
  on: { STOP: { target: ".stopped" } },
  states: {
    pulling: {
      // The edge asks for more only here.
      tags: ["asking"],
      on: {
        HOLD: { target: "holding" },
        DRAIN: { target: "draining" },
        CUT_SHORT: { target: "pausing" },
        NO_RESPONDERS: { target: "checking" },
        CONSUMER_GONE: [
          { guard: "retriesGone", target: "pausing" },
          { target: "gone", actions: emit(({ event }) => ({ type: "gone" as const, reason: event.reason })) },
        ],
      },
    },
    // A pull the server ended at once would be asked again at once, and again: wait a while.
    pausing: {
      after: { pause: { target: "pulling", actions: emit({ type: "ask" }) } },
      on: {
        HOLD: { target: "holding" },
        DRAIN: { target: "draining" },
      },
    },
    draining: {
      // Pulls that already cover the credit would have been served had anything been there:
      // only the rest is asked for, with no_wait.
      entry: emit({ type: "pull_no_wait" }),
      // A long poll cut short meanwhile is asked again after the drain; the drain itself
      // ends only with its own pull, so nothing it brings comes after "drained".
      on: {
        DRAINED: { target: "pulling", actions: emit({ type: "drained" }) },
        HOLD: { target: "holding", actions: emit({ type: "drained" }) },
        STOP: { target: "stopped", actions: emit({ type: "drained" }) },
      },
    },
    holding: {
      entry: emit({ type: "forget_pulls" }),
      on: {
        RESUME: { target: "pulling", actions: emit({ type: "ask" }) },
        // Nothing can be fetched now: the drain is over at once.
        DRAIN: { actions: emit({ type: "drained" }) },
      },
    },
    checking: {
      entry: emit({ type: "check_consumer" }),
      on: {
        CONSUMER_FOUND: { target: "pausing" },
        CONSUMER_GONE: [
          { guard: "retriesGone", target: "pausing" },
          { target: "gone", actions: emit(({ event }) => ({ type: "gone" as const, reason: event.reason })) },
        ],
        HOLD: { target: "holding" },
        DRAIN: { actions: emit({ type: "drained" }) },
      },
    },
    // The reader is told (an AMQP link detaches) and stops the engine.
    gone: {
      on: { DRAIN: { actions: emit({ type: "drained" }) } },
    },
    stopped: {
      type: "final",
      entry: emit({ type: "stop" }),
    },
  },
});
