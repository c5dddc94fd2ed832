import { natsConnectionMachine } from "../../machines/natsConnection.js";
import { atMost, Broken, canAlwaysEnd, emits, invariant, type Model, neverAfter } from "../model.js";

export const natsConnectionModel = (): Model => ({
  machine: natsConnectionMachine,
  bound: "connected or failed (auth or not), disconnect, reconnect, last lease released, closed; every order",
  events: [
    { type: "CONNECTED", server: "n1" },
    { type: "CONNECT_FAILED", reason: "refused", auth: true },
    { type: "CONNECT_FAILED", reason: "no servers", auth: false },
    { type: "DISCONNECTED" },
    { type: "RECONNECTED", server: "n2" },
    { type: "RELEASE_LAST" },
    { type: "CLOSED" },
  ],
  invariants: [
    neverAfter("never up again once draining", "drain", (step) => emits(step, "drain"), ["up"]),
    atMost("gone once", "gone"),
    invariant("up and down alternate, up first", "down", (last: string, step) => {
      for (const e of step.emitted) {
        if (e.type !== "up" && e.type !== "down") continue;
        if (e.type === last) return new Broken(`${e.type} twice in a row`);
        last = e.type;
      }
      return last;
    }),
  ],
  progress: [
    canAlwaysEnd,
    {
      name: "once the last lease is released, ends when NATS closes",
      after: (step) => emits(step, "drain"),
      using: (e) => e.type === "CLOSED",
    },
  ],
});
