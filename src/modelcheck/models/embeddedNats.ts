import { embeddedNatsMachine } from "../../machines/embeddedNats.js";
import { atMost, canAlwaysEnd, type Model, neverAfter } from "../model.js";

export const embeddedNatsModel = (): Model => ({
  machine: embeddedNatsMachine,
  bound:
    "ready, exit, stop; restarts counted up to 2 (only the backoff delay depends on more); every order, timers fire at any point",
  events: [{ type: "READY", version: "2.11.0" }, { type: "EXITED", code: 1, signal: null }, { type: "STOP" }],
  abstract: (c) => ({ ...c, restarts: Math.min(Number(c.restarts), 2) }),
  invariants: [
    neverAfter(
      "no restart once stopping",
      "STOP",
      (step) => step.event.type === "STOP" && step.before?.status === "active",
      ["spawn"],
    ),
    atMost("kills the child once", "kill"),
    atMost("says stopped once", "stopped"),
  ],
  progress: [
    canAlwaysEnd,
    {
      name: "once stopping, ends with nothing but the child's exit",
      after: (step) => step.event.type === "STOP",
      using: (e) => e.type === "EXITED",
    },
  ],
});
