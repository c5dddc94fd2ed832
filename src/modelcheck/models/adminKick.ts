import { adminKickMachine } from "../../machines/adminKick.js";
import { atMost, Broken, canAlwaysEnd, count, emits, invariant, type Model, onlyAfter } from "../model.js";

export const adminKickModel = (): Model => ({
  machine: adminKickMachine,
  input: { timeoutMs: 5_000 },
  bound: "found, not found, ambiguous, gone; every order, timers fire at any point",
  events: [
    { type: "FOUND", cid: 7 },
    { type: "NOT_FOUND", reason: "no such client" },
    { type: "AMBIGUOUS", cids: [1, 2] },
    { type: "GONE" },
  ],
  invariants: [
    atMost("answers once", "kicked"),
    invariant("answers exactly once: kicked or failed", 0, (n: number, step) => {
      const total = n + count(step, "kicked") + count(step, "failed");
      if (total > 1) return new Broken("two answers");
      return step.after.status === "done" && total === 0 ? new Broken("ended without an answer") : total;
    }),
    onlyAfter("kicks only the client it found", "kick", (step) => step.event.type === "FOUND"),
  ],
  progress: [
    canAlwaysEnd,
    { name: "an operator is never left waiting once the kick is sent", after: (step) => emits(step, "kick") },
  ],
});
