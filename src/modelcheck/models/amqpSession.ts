import type { AnyStateMachine } from "xstate";
import { amqpSessionMachine } from "../../machines/amqpSession.js";
import { atMost, Broken, canAlwaysEnd, emits, fields, inState, invariant, type Model } from "../model.js";

const MAX_LINKS = 2;

/** A session whose client attaches on good and bad handles, detaches, ends, or whose connection goes. */
export const amqpSessionModel = (machine: AnyStateMachine = amqpSessionMachine): Model => ({
  machine,
  input: { channel: 0, maxLinks: MAX_LINKS, endGraceMs: 5_000 },
  bound: `handle-max ${MAX_LINKS - 1}; attaches on handles 0, 1 and 5, detaches, the client's end, the connection closing; every order, links counted up to 4, timers fire at any point`,
  events: [
    { type: "LINK_ATTACHED", handle: 0 },
    { type: "LINK_ATTACHED", handle: 1 },
    { type: "LINK_ATTACHED", handle: 5 },
    { type: "LINK_DETACHED" },
    { type: "REMOTE_END" },
    { type: "CONNECTION_CLOSED" },
  ],
  abstract: (c) => ({ ...c, links: Math.min(Number(c.links), 4) }),
  invariants: [
    atMost("released once", "release"),
    atMost("ends its side once", "end"),
    invariant("ends with an error only for a link past handle-max + 1", null, (_: null, step) => {
      if (!emits(step, "end")) return null;
      const before = Number(fields(step.before?.context ?? {}).links);
      return step.event.type === "LINK_ATTACHED" && before >= MAX_LINKS
        ? null
        : new Broken(`end on ${step.event.type}`);
    }),
    invariant("a handle beyond handle-max closes the connection", null, (_: null, step) =>
      step.event.type === "LINK_ATTACHED" &&
      Number(fields(step.event).handle) > MAX_LINKS - 1 &&
      inState(step.before, "begun") &&
      !emits(step, "close_connection")
        ? new Broken("a handle beyond handle-max let through")
        : null,
    ),
    invariant("the links hear of every end of their session", null, (_: null, step) =>
      (step.event.type === "REMOTE_END" || emits(step, "end")) &&
      inState(step.before, "begun") &&
      !emits(step, "detach_links")
        ? new Broken(`${step.event.type}: the links were not told`)
        : null,
    ),
    invariant("silent once the connection closed", null, (_: null, step) =>
      step.event.type === "CONNECTION_CLOSED" && step.emitted.some((e) => e.type !== "release")
        ? new Broken(`said ${step.emitted.map((e) => e.type).join(", ")} to a closed connection`)
        : null,
    ),
  ],
  progress: [
    canAlwaysEnd,
    {
      name: "an end the client never answers ends on the grace timer",
      after: (step) => emits(step, "end") || emits(step, "detach_links"),
    },
  ],
});
