import { gatewayMachine } from "../../machines/gateway.js";
import { atMost, Broken, canAlwaysEnd, emits, fields, inState, invariant, type Model, neverAfter } from "../model.js";

export const gatewayModel = (): Model => ({
  machine: gatewayMachine,
  input: { ldmDurationMs: 1_000 },
  bound: "start or failed start, lame duck, stop, clients drained, stopped; every order, timers fire at any point",
  events: [
    { type: "STARTED" },
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
    atMost("exits once", "shutdown"),
    invariant("exit code 2 after a failed start, 0 otherwise", false, (failed: boolean, step) => {
      const now = failed || (step.event.type === "START_FAILED" && inState(step.before, "starting"));
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
