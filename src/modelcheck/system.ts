import type { AnyEventObject, AnyMachineSnapshot, AnyStateMachine, EventObject } from "xstate";
import type { Broken } from "./model.js";
import type { Timer } from "./step.js";

/**
 * A system of machines wired as the edges wire them: what one actor emits becomes, by
 * the model's routing rules, events for other actors (at once, as a synchronous handler
 * does, or as a message the world delivers at any later step, in any order), changes to
 * an abstract world (a store, a directory), or actors started. The world acts too: a
 * client connects, the store answers, NATS goes away. `checkSystem` explores every
 * interleaving of those steps and of each actor's timers.
 */
export interface ActorSpec {
  /** A real machine from src/machines (or a variant a test breaks on purpose). */
  readonly machine: AnyStateMachine;
  readonly input?: unknown;
  /** Not running until a rule starts it (`start`): a session is started by its connection. */
  readonly startsLater?: boolean;
  /** The context as far as behaviour depends on it; default: all of it. */
  readonly abstract?: (context: Record<string, unknown>) => unknown;
}

/** What a routing rule or a world event does. */
export type Effect<W> =
  /** The event reaches the actor now, inside the current step (a handler that calls `actor.send`). */
  | { readonly kind: "send"; readonly to: string; readonly event: EventObject }
  /** A message in flight: delivered at any later step, in any order with the others (a Promise, a microtask, the network). */
  | { readonly kind: "post"; readonly to: string; readonly event: EventObject }
  /** As `post`, unless the same message is in flight already (a scheduling guard such as `pumpScheduled`). */
  | { readonly kind: "postOnce"; readonly to: string; readonly event: EventObject }
  | { readonly kind: "start"; readonly actor: string; readonly input?: unknown }
  | { readonly kind: "world"; readonly update: (world: W) => W };

export const send = <W>(to: string, event: AnyEventObject): Effect<W> => ({ kind: "send", to, event });
export const post = <W>(to: string, event: AnyEventObject): Effect<W> => ({ kind: "post", to, event });
export const postOnce = <W>(to: string, event: AnyEventObject): Effect<W> => ({ kind: "postOnce", to, event });
export const start = <W>(actor: string, input?: unknown): Effect<W> => ({ kind: "start", actor, input });
export const world = <W>(update: (world: W) => W): Effect<W> => ({ kind: "world", update });

/** Routed when an actor reaches a final state: what its end releases (a claim, a registration). */
export const ENDED: EventObject = { type: "(ended)" };

/** A message in flight. `to` names an actor, or a world part the model handles (`handlers`). */
export interface Message {
  readonly to: string;
  readonly event: EventObject;
}

/** The system as rules, world events and properties see it. */
export interface SystemView<W> {
  readonly world: W;
  readonly queued: readonly Message[];
  /** undefined until the actor is started. */
  snapshot(actor: string): AnyMachineSnapshot | undefined;
  /** Started and not final. */
  live(actor: string): boolean;
  /** Started and final (done). */
  ended(actor: string): boolean;
  inState(actor: string, state: string): boolean;
  hasTag(actor: string, tag: string): boolean;
}

/** One step of the system: a message delivered, a timer fired, or something the world did. */
export type SystemEvent =
  | { readonly kind: "deliver"; readonly to: string; readonly event: EventObject }
  | { readonly kind: "timer"; readonly actor: string; readonly event: EventObject }
  | { readonly kind: "world"; readonly name: string };

/** What an actor emitted, in the order the actors emitted it. */
export interface Emission {
  readonly actor: string;
  readonly event: EventObject;
}

export interface SystemStep<W> {
  readonly event: SystemEvent;
  /** undefined for the start of the system. */
  readonly before: SystemView<W> | undefined;
  readonly after: SystemView<W>;
  readonly emitted: readonly Emission[];
  /** Actors that reached a final state in this step. */
  readonly ended: readonly string[];
}

export interface SystemInvariant<W = unknown, M = unknown> {
  readonly name: string;
  readonly initial: M;
  readonly step: (memory: M, step: SystemStep<W>) => M | Broken;
}

export const systemInvariant = <W, M>(
  name: string,
  initial: M,
  step: (memory: M, step: SystemStep<W>) => M | Broken,
): SystemInvariant<W> => ({ name, initial, step }) as SystemInvariant<W>;

/**
 * From every state reachable once `after` matched a step, a state where `reach` holds
 * (default: every started actor final) stays reachable through timers, deliveries of
 * what is in flight (the edges' own answers come, in some order) and the world events
 * `using` allows (default: none).
 */
export interface SystemProgress<W> {
  readonly name: string;
  readonly after: (step: SystemStep<W>) => boolean;
  readonly using?: (event: SystemEvent) => boolean;
  readonly reach?: (view: SystemView<W>) => boolean;
}

export interface WorldEvent<W> {
  readonly name: string;
  readonly effects: readonly Effect<W>[];
}

export interface SystemModel<W = unknown> {
  readonly kind: "system";
  readonly name: string;
  /** The bound of the exploration, in words, printed with the result. */
  readonly bound: string;
  readonly actors: Readonly<Record<string, ActorSpec>>;
  /** The abstract world at the start (plain JSON: it is part of the explored state). */
  readonly world: W;
  /** The edges: what an actor's emitted event (or its end, `ENDED`) turns into. */
  readonly route: (actor: string, event: EventObject, view: SystemView<W>) => readonly Effect<W>[];
  /** Messages posted to a world part (not an actor) are handled here when delivered. */
  readonly handlers?: Readonly<Record<string, (event: EventObject, view: SystemView<W>) => readonly Effect<W>[]>>;
  /** What the world may do in this state (clients, the store, NATS); each is one step. */
  readonly events: (view: SystemView<W>) => readonly WorldEvent<W>[];
  /** The world in a few words, for counter-examples. */
  readonly describeWorld?: (world: W) => string;
  readonly invariants: readonly SystemInvariant<W>[];
  readonly progress: readonly SystemProgress<W>[];
}

/** Every started actor is final: the system has nothing left to do. */
export const allEnded = <W>(model: SystemModel<W>, view: SystemView<W>): boolean =>
  Object.keys(model.actors).every((a) => view.snapshot(a) === undefined || view.ended(a));

/** The system ran into a state from which an actor threw. */
export const THROWS = "no machine throws";

// -- the explored state -------------------------------------------------------------

export interface ActorState {
  readonly snapshot: AnyMachineSnapshot;
  readonly timers: readonly Timer[];
}

export interface SystemNode<W> {
  readonly key: string;
  readonly actors: Readonly<Record<string, ActorState | undefined>>;
  readonly world: W;
  readonly queued: readonly Message[];
  readonly memory: readonly unknown[];
  readonly broken?: { readonly invariant: string; readonly message: string };
  readonly triggered: readonly string[];
}

export function viewOf<W>(node: Pick<SystemNode<W>, "actors" | "world" | "queued">): SystemView<W> {
  const snap = (a: string) => node.actors[a]?.snapshot;
  return {
    world: node.world,
    queued: node.queued,
    snapshot: snap,
    live: (a) => snap(a)?.status === "active",
    ended: (a) => snap(a)?.status === "done",
    inState: (a, s) => {
      const x = snap(a);
      return x !== undefined && x.status === "active" && x.matches(s as never);
    },
    hasTag: (a, t) => {
      const x = snap(a);
      return x !== undefined && x.status === "active" && x.hasTag(t as never);
    },
  };
}
