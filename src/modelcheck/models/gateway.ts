import { gatewayMachine } from "../../machines/gateway.js";
import { atMost, Broken, canAlwaysEnd, emits, fields, inState, invariant, type Model, neverAfter } from "../model.js";

export const gatewayModel = (): Model => ({
  machine: gatewayMachine,
  input: { ldmDurationMs: 1_000 },
  bound:
    "start, listening or a listener that cannot open, lame duck, stop, clients drained, stopped; every order, timers fire at any point",
  events: [
    { type: "STARTED" },
    { type: "LISTENING" },
    { type: "START_FAILED", reason: "port in use" },
    { type: "LAME_DUCK" },
    { type: "STOP" },
    { type: "CLIENTS_DRAINED" },
    { type: "STOPPED" },
  ],
  invariants: [
    neverAfter("lame duck never reopens the listeners", "close_listeners", (step) => emits(step, "close_listeners"), [
      "open_listeners",
    ]),
    invariant("accepts clients only between opening the listeners and closing them", false, (closed: boolean, step) => {
      const accepting = step.after.status === "active" && step.after.hasTag("accepting");
      if (accepting && (closed || !(inState(step.after, "opening") || inState(step.after, "serving"))))
        return new Broken(`accepting in ${JSON.stringify(step.after.value)}`);
      return closed || emits(step, "close_listeners");
    }),
    invariant("serves only once the listeners were told to open", false, (opened: boolean, step) => {
      const now = opened || emits(step, "open_listeners");
      return inState(step.after, "serving") && !now ? new Broken("serving before open_listeners") : now;
    }),
    atMost("opens the listeners once", "open_listeners"),
    atMost("exits once", "shutdown"),
    invariant("exit code 2 after a failed start, 0 otherwise", false, (failed: boolean, step) => {
      const now =
        failed ||
        (step.event.type === "START_FAILED" && (inState(step.before, "starting") || inState(step.before, "opening")));
      const exit = step.emitted.find((e) => e.type === "shutdown");
      return exit && fields(exit).exitCode !== (now ? 2 : 0)
        ? new Broken(`exit code ${String(fields(exit).exitCode)}`)
        : now;
    }),
  ],
  progress: [
    canAlwaysEnd,
    {
      name: "once draining or stopping, stops with nothing but its own STOPPED",
      after: (step) => inState(step.after, "lameDuck") || inState(step.after, "stopping"),
      using: (e) => e.type === "STOPPED",
    },
  ],
});
