import {
  type AnyActorScope,
  type AnyMachineSnapshot,
  type AnyStateMachine,
  createEmptyActor,
  type EventObject,
} from "xstate";
import { isEmpty, memoKey, recall, remember } from "./stepMemo.js";

/**
 * One machine stepped as data: a snapshot and an event in, the next snapshot and what the
 * step asks of the world out, in order. Nothing runs here. The gateway's actors
 * (actors/machineActor.ts), the tests and the model checker all step machines through
 * this one function, over xstate's public `StateMachine.getInitialSnapshot` and
 * `StateMachine.transition` with a scope that records actions instead of running them.
 */
export type Effect =
  /** An `emit`: a command for the machine's edge. */
  | { readonly kind: "emit"; readonly event: EventObject }
  /** A delayed event (`after`): send `event` back in `delay` ms unless cancelled by `id`. */
  | { readonly kind: "schedule"; readonly id: string; readonly event: EventObject; readonly delay: number }
  | { readonly kind: "cancel"; readonly id: string }
  /** A custom action (none in src/machines, which are pure; a test's machine may have one). */
  | { readonly kind: "run"; readonly exec: () => void };

export interface Step {
  readonly snapshot: AnyMachineSnapshot;
  readonly effects: readonly Effect[];
}

export const INIT: EventObject = { type: "xstate.init" };
/** The event that stops a machine: its snapshot's status becomes "stopped". */
export const STOP: EventObject = { type: "xstate.stop" };

/** The timer events are `xstate.after.<delay>.<state>`; anything else is sent by the world. */
export const isTimer = (event: EventObject): boolean => event.type.startsWith("xstate.after.");

/** The machine's initial snapshot, with what its entry actions ask. */
export function initialStep(machine: AnyStateMachine, input: unknown): Step {
  recorded = [];
  try {
    const snapshot = shared(machine, machine.getInitialSnapshot(scope(), input));
    return { snapshot, effects: effectsOf(recorded) };
  } finally {
    recorded = undefined;
  }
}

/**
 * One event through the machine (one macrostep: raised events and eventless transitions
 * included); a step taken before from the same context in the same configuration, on an
 * equal event, is reused (stepMemo.ts).
 */
export function step(machine: AnyStateMachine, snapshot: AnyMachineSnapshot, event: EventObject): Step {
  const key = memoKey(snapshot, event);
  const known = key === undefined ? undefined : recall(key, event);
  if (known) return known;
  recorded = [];
  let taken: Step;
  try {
    const next = shared(machine, machine.transition(snapshot, event, scope()));
    taken = { snapshot: next, effects: effectsOf(recorded) };
  } finally {
    recorded = undefined;
  }
  if (key !== undefined) remember(snapshot, key, event, taken);
  return taken;
}

/** What a snapshot derives from its configuration alone, kept once per configuration. */
interface Configuration {
  readonly nodes: AnyMachineSnapshot["_nodes"];
  readonly value: AnyMachineSnapshot["value"];
  readonly tags: AnyMachineSnapshot["tags"];
}
/** A trie over a configuration's state nodes, in the order xstate lists them. */
interface ConfigurationTrie {
  next?: Map<unknown, ConfigurationTrie>;
  found?: Configuration;
}
const configurations = new WeakMap<AnyStateMachine, { trie: ConfigurationTrie; size: number }>();
/** A machine has few configurations; a bound all the same. */
const CONFIGURATIONS_KEPT = 1024;
/** xstate copies a history value before it changes one (`exitStates`), so one empty one serves every snapshot. */
const NO_HISTORY = {};

/**
 * The snapshot with its state nodes, value and tags shared with every other snapshot of
 * the same configuration, and an empty history shared too. xstate builds them anew per
 * step (a tags Set is 230 B even empty) and never changes them in place (a step copies
 * `_nodes` into a Set and makes new arrays), so ten thousand idle connections in the
 * same state hold one copy instead of ten thousand (docs/performance.md, issue 23).
 */
function shared(machine: AnyStateMachine, snapshot: AnyMachineSnapshot): AnyMachineSnapshot {
  const s = snapshot as { -readonly [K in keyof AnyMachineSnapshot]: AnyMachineSnapshot[K] };
  let known = configurations.get(machine);
  if (!known) {
    known = { trie: {}, size: 0 };
    configurations.set(machine, known);
  }
  let at = known.trie;
  for (const node of s._nodes) {
    let next = at.next?.get(node);
    if (!next) {
      if (known.size >= CONFIGURATIONS_KEPT) return snapshot;
      next = {};
      at.next ??= new Map();
      at.next.set(node, next);
    }
    at = next;
  }
  if (at.found) {
    s._nodes = at.found.nodes;
    s.value = at.found.value;
    s.tags = at.found.tags;
  } else {
    at.found = { nodes: s._nodes, value: s.value, tags: s.tags };
    known.size++;
  }
  if (s.historyValue !== NO_HISTORY && isEmpty(s.historyValue)) s.historyValue = NO_HISTORY;
  return snapshot;
}

interface RecordedAction {
  readonly type: string;
  readonly info?: unknown;
  readonly params?: unknown;
  readonly exec?: ((info: unknown, params: unknown) => void) | undefined;
}

/** The actions of the step being taken; steps are synchronous and never nest. */
let recorded: RecordedAction[] | undefined;
let inert: AnyActorScope | undefined;

/**
 * One scope for every step: it runs nothing and records each action. (xstate's own
 * `transition()` builds a throw-away actor of the machine per call, without its input: a
 * machine whose delays read an input-made context can loop there, and it costs an actor.)
 */
function scope(): AnyActorScope {
  if (inert) return inert;
  const self = createEmptyActor();
  inert = {
    self,
    id: "",
    sessionId: "",
    logger: () => {},
    defer: () => {},
    system: self.system,
    stopChild: () => {},
    emit: () => {},
    actionExecutor: (action: RecordedAction) => recorded?.push(action),
  } as unknown as AnyActorScope;
  return inert;
}

function effectsOf(actions: readonly RecordedAction[]): Effect[] {
  const effects: Effect[] = [];
  for (const action of actions) {
    const params = (action.params ?? {}) as { event?: EventObject; id?: string; delay?: number; sendId?: string };
    switch (action.type) {
      case "xstate.emit":
        if (params.event) effects.push({ kind: "emit", event: params.event });
        break;
      case "xstate.raise":
        // An undelayed raise was taken inside the macrostep; only a delayed one reaches here.
        if (params.delay !== undefined && params.event)
          effects.push({
            kind: "schedule",
            id: params.id ?? params.event.type,
            event: params.event,
            delay: params.delay,
          });
        break;
      case "xstate.cancel":
        if (params.sendId !== undefined) effects.push({ kind: "cancel", id: params.sendId });
        break;
      default: {
        const exec = action.exec;
        if (exec && !action.type.startsWith("xstate."))
          effects.push({ kind: "run", exec: () => exec(action.info, action.params) });
      }
    }
  }
  return effects;
}
