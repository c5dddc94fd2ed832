import type { AnyStateMachine } from "xstate";
import { jetStreamPullMachine } from "../../machines/jetStreamPull.js";
import { atMost, Broken, canAlwaysEnd, emits, inState, invariant, type Model, neverAfter } from "../model.js";

/**
 * The pull engine with everything its edge and NATS may tell it, in any order: NATS away and
 * back, drains and their end, pulls cut short, no responders and what CONSUMER.INFO says, the
 * reader stopping. For both readers: an AMQP link (a gone consumer ends it) and an MQTT session
 * (it asks again).
 */
export const jetStreamPullModel = (
  onGone: "end" | "retry",
  machine: AnyStateMachine = jetStreamPullMachine,
): Model => ({
  machine,
  name: `jetStreamPull (a gone consumer: ${onGone})`,
  input: { onGone, pauseMs: 1_000 },
  bound:
    "hold, resume, drain, drained, cut short, no responders, consumer found or gone, stop; every order, the pause fires at any point",
  events: [
    { type: "HOLD" },
    { type: "RESUME" },
    { type: "DRAIN" },
    { type: "DRAINED" },
    { type: "CUT_SHORT" },
    { type: "NO_RESPONDERS" },
    { type: "CONSUMER_FOUND" },
    { type: "CONSUMER_GONE", reason: "10014 consumer not found" },
    { type: "STOP" },
  ],
  invariants: [
    neverAfter("nothing is asked once stopped", "stop", (step) => emits(step, "stop"), [
      "ask",
      "pull_no_wait",
      "check_consumer",
    ]),
    invariant("asks again only where it may ask", null, (_: null, step) =>
      emits(step, "ask") && !step.after.hasTag("asking")
        ? new Broken(`ask in ${JSON.stringify(step.after.value)}`)
        : null,
    ),
    invariant("nothing is asked while NATS is away", null, (_: null, step) =>
      (emits(step, "ask") || emits(step, "pull_no_wait")) && inState(step.after, "holding")
        ? new Broken(`${step.event.type} asked while holding`)
        : null,
    ),
    // AMQP part 2, 2.6.7: a drain is answered, however the engine is when it comes (one that
    // comes during a drain waits for the same answer: the edge resolves every waiting drain).
    invariant("every drain taken is answered once", 0, (open: number, step) => {
      const taken =
        step.event.type === "DRAIN" && step.before?.status === "active" && !inState(step.before, "draining") ? 1 : 0;
      const answered = step.emitted.filter((e) => e.type === "drained").length;
      const now = open + taken - answered;
      if (now < 0) return new Broken("drained without a drain");
      if (now > 0 && step.after.status === "done") return new Broken("stopped with a drain unanswered");
      return now;
    }),
    atMost("the reader is told the consumer is gone at most once", "gone"),
    ...(onGone === "retry"
      ? [neverAfter("a reader that retries is never told gone", "start", () => true, ["gone"])]
      : []),
    atMost("stops once", "stop"),
  ],
  progress: [
    canAlwaysEnd,
    {
      name: "a drain ends on the edge's answers",
      after: (step) => inState(step.after, "draining"),
      using: (e) => ["DRAINED", "CONSUMER_FOUND", "CONSUMER_GONE"].includes(e.type),
      reach: (s) => s.status !== "active" || !s.matches("draining"),
    },
    {
      name: "a pause ends on its timer alone",
      after: (step) => inState(step.after, "pausing"),
      reach: (s) => s.status !== "active" || !s.matches("pausing"),
    },
  ],
});
