import { lameDuckMachine } from "../../machines/adminLameDuck.js";
import { atMost, canAlwaysEnd, type Model } from "../model.js";

const lameDuckModel = (clients: number): Model => ({
  machine: lameDuckMachine,
  name: `lameDuck (${clients} clients)`,
  input: { clients, overMs: 3_000, graceMs: 5_000 },
  bound: `${clients} clients at the start, all gone at any point; every order, timers fire at any point`,
  events: [{ type: "CLIENTS_GONE" }],
  invariants: [
    atMost("asks each client once", "close_next", clients),
    atMost("reports once", "drained"),
    atMost("times out once", "timed_out"),
  ],
  progress: [canAlwaysEnd, { name: "ends on its own timers", after: (step) => step.event.type === "xstate.init" }],
});

export const lameDuckModels = (): Model[] => [lameDuckModel(0), lameDuckModel(3)];
