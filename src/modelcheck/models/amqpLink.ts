import type { AnyStateMachine } from "xstate";
import { amqpReceiverLinkMachine, amqpSenderLinkMachine } from "../../machines/amqpLink.js";
import {
  atMost,
  Broken,
  canAlwaysEnd,
  emits,
  type Invariant,
  inState,
  invariant,
  type Model,
  neverAfter,
  onlyAfter,
} from "../model.js";

const error = { condition: "amqp:not-found", description: "no such address" };

const events = [
  { type: "RESOLVED", address: "orders" },
  { type: "RESOLVED", address: null },
  { type: "REFUSED", error },
  { type: "FAULT", error: { condition: "amqp:link:message-size-exceeded", description: "too large" } },
  { type: "REMOTE_DETACH" },
  { type: "NATS_DOWN" },
  { type: "NATS_UP" },
];

const common: Invariant[] = [
  onlyAfter("credit only on an attached link", "flow", (step) => emits(step, "attach")),
  neverAfter("a refused link never attaches", "refuse", (step) => emits(step, "refuse"), ["attach", "flow"]),
  invariant("no credit while NATS is down", "", (last: string, step) => {
    for (const e of step.emitted) if (e.type === "flow" || e.type === "hold") last = e.type;
    return inState(step.after, "active.nats.down") && last !== "hold"
      ? new Broken("NATS is down and the last word was flow")
      : last;
  }),
  // A transfer without credit, or a subscription NATS refused, while the address was resolved.
  neverAfter(
    "a fault while attaching refuses the attach",
    "a fault while attaching",
    (step) => step.event.type === "FAULT" && inState(step.before, "attaching"),
    ["attach", "flow"],
  ),
  atMost("released once", "release"),
  invariant("released only at the end", null, (_: null, step) =>
    emits(step, "release") && step.after.status !== "done" ? new Broken("release while the link goes on") : null,
  ),
  invariant("silent once the client detached", null, (_: null, step) =>
    step.event.type === "REMOTE_DETACH" &&
    step.before?.status === "active" &&
    step.emitted.some((e) => e.type !== "release")
      ? new Broken(`said ${step.emitted.map((e) => e.type).join(", ")} to a client that left`)
      : null,
  ),
];

const progress = [
  canAlwaysEnd,
  {
    name: "a detach the client never answers ends on the grace timer",
    after: (step: Parameters<Model["progress"][number]["after"]>[0]) => emits(step, "detach"),
  },
];

/** Links are given no clock of their own beyond the detach grace. */
const input = { detachGraceMs: 5_000 };
const bound =
  "addresses resolved (named or dynamic) or refused, a fault, the client's detach, NATS down/up; every order, timers fire at any point";

export const amqpSenderLinkModel = (machine: AnyStateMachine = amqpSenderLinkMachine): Model => ({
  machine,
  input,
  bound,
  events,
  invariants: common,
  progress,
});

export const amqpReceiverLinkModel = (machine: AnyStateMachine = amqpReceiverLinkMachine): Model => ({
  machine,
  input,
  bound: `${bound}; drain and drained`,
  events: [...events, { type: "DRAIN" }, { type: "DRAINED" }],
  invariants: [
    ...common,
    // AMQP part 2, 2.6.7: a drain is answered (sent what there was, the rest given back).
    invariant("a drain is answered", null, (_: null, step) =>
      step.event.type === "DRAIN" && inState(step.before, "active.credit.flowing") && !emits(step, "drain")
        ? new Broken("DRAIN not answered")
        : null,
    ),
  ],
  progress,
});
