import { adminSessionDropMachine } from "../../machines/adminSessionDrop.js";
import { adminStoreRequestMachine } from "../../machines/adminStoreRequest.js";
import { Broken, canAlwaysEnd, count, emits, invariant, type Model, onlyAfter } from "../model.js";

/** Each store request and each session drop answers the operator exactly once. */
const answersOnce = (answers: readonly string[]) =>
  invariant("answers exactly once", 0, (n: number, step) => {
    const total = n + answers.reduce((sum, a) => sum + count(step, a), 0);
    if (total > 1) return new Broken("two answers");
    return step.after.status === "done" && total === 0 ? new Broken("ended without an answer") : total;
  });

export const adminStoreRequestModel = (): Model => ({
  machine: adminStoreRequestMachine,
  input: { timeoutMs: 10_000 },
  bound: "answered, failed; every order, the timer fires at any point",
  events: [
    { type: "ANSWERED", reply: {} },
    { type: "FAILED", reason: "no JetStream" },
  ],
  invariants: [answersOnce(["answer", "failed"])],
  progress: [
    canAlwaysEnd,
    { name: "an operator is never left waiting once NATS is asked", after: (step) => emits(step, "ask") },
  ],
});

export const adminSessionDropModel = (): Model => ({
  machine: adminSessionDropMachine,
  input: { timeoutMs: 10_000 },
  bound: "found (connected or not), not found, kicked, deleted, failed; every order, timers fire at any point",
  events: [
    { type: "FOUND", owner: "gw-b" },
    { type: "FOUND", owner: undefined },
    { type: "NOT_FOUND" },
    { type: "KICKED" },
    { type: "DELETED", consumers: 1 },
    { type: "FAILED", reason: "no answer" },
  ],
  invariants: [
    answersOnce(["dropped", "failed"]),
    onlyAfter(
      "deletes only after reading the record",
      "delete",
      (step) => step.event.type === "FOUND" || step.event.type === "KICKED",
    ),
    onlyAfter("kicks only a connected session's client", "kick", (step) => step.event.type === "FOUND"),
  ],
  progress: [
    canAlwaysEnd,
    { name: "an operator is never left waiting once the record is read", after: (step) => emits(step, "read") },
  ],
});
