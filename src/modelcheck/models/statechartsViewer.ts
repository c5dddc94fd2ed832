import type { AnyStateMachine } from "xstate";
import { statechartsViewerMachine } from "../../machines/statechartsViewer.js";
import { atMost, Broken, canAlwaysEnd, emits, inState, invariant, type Model } from "../model.js";

export const statechartsViewerModel = (machine: AnyStateMachine = statechartsViewerMachine): Model => ({
  machine,
  input: { heartbeatMs: 15_000, stallMs: 30_000 },
  bound: "blocked, drained, closed, shutdown; every order, timers fire at any point",
  events: [{ type: "BLOCKED" }, { type: "DRAINED" }, { type: "CLOSED" }, { type: "SHUTDOWN" }],
  invariants: [
    invariant("nothing is written while congested", null, (_: null, step) =>
      emits(step, "sync") && inState(step.after, "congested") ? new Broken("sync while congested") : null,
    ),
    invariant("a drained viewer is brought up to date", null, (_: null, step) =>
      step.event.type === "DRAINED" && inState(step.before, "congested") && !emits(step, "sync")
        ? new Broken("no sync after DRAINED")
        : null,
    ),
    atMost("ends once", "end"),
  ],
  progress: [
    canAlwaysEnd,
    {
      name: "a viewer that stops reading is let go on a timer",
      after: (step) => inState(step.after, "congested"),
      reach: (s) => !s.matches("congested"),
    },
  ],
});
