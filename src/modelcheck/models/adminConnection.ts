import { adminConnectionMachine } from "../../machines/adminConnection.js";
import { Broken, emits, inState, invariant, type Model, onlyAfter } from "../model.js";

/** The admin connection never ends: what it must do is come back, and say so while it cannot. */
export const adminConnectionModel = (): Model => ({
  machine: adminConnectionMachine,
  bound:
    "connected, refused (auth or not), a refused subscription, disconnect, reconnect, close; failures counted up to 3 (only the backoff depends on more); every order, timers fire at any point",
  events: [
    { type: "CONNECTED", account: "ADMIN", server: "n1" },
    { type: "CONNECT_FAILED", reason: "authorization violation", auth: true },
    { type: "CONNECT_FAILED", reason: "no servers", auth: false },
    { type: "SUBSCRIBE_REFUSED", subject: "$MQG.admin.ping.>", reason: "permissions violation" },
    { type: "DISCONNECTED" },
    { type: "RECONNECTED", server: "n2" },
    { type: "CLOSED", reason: "server closed" },
  ],
  abstract: (c) => ({
    ...c,
    failures: Math.min(Number(c.failures), 3),
    refusedSubjects: [...new Set(c.refusedSubjects as string[])].sort(),
  }),
  invariants: [
    invariant("serving is announced only on a live connection", null, (_: null, step) =>
      emits(step, "serving") && step.event.type !== "CONNECTED" && step.event.type !== "RECONNECTED"
        ? new Broken(`serving on ${step.event.type}`)
        : null,
    ),
    onlyAfter("subscribes only once connected", "subscribe", (step) => step.event.type === "CONNECTED"),
    invariant("every outage is warned about", null, (_: null, step) => {
      const down = inState(step.after, "down") || inState(step.after, "refused");
      const was = inState(step.before, "down") || inState(step.before, "refused");
      return down && !was && !emits(step, "warn") ? new Broken(`no warning on ${step.event.type}`) : null;
    }),
  ],
  progress: [
    { name: "can always serve again", after: () => true, using: () => true, reach: (s) => s.matches("serving") },
    {
      name: "a refused or closed connection is retried on a timer",
      after: (step) => inState(step.after, "refused") || inState(step.after, "down.retrying"),
      reach: (s) => !s.matches("refused") && !s.matches("down.retrying"),
    },
  ],
});
