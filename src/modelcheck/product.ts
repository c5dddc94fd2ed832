import {
  type AnyActorScope,
  type AnyMachineSnapshot,
  createEmptyActor,
  type EventObject,
  fromTransition,
} from "xstate";
import { Broken, type Model, type Step } from "./model.js";

/** A delayed event the machine has scheduled and not cancelled. */
interface Timer {
  readonly id: string;
  readonly event: EventObject;
}

/**
 * One explored state: the machine's snapshot, its pending timers, and each invariant's
 * memory of the path. Two nodes with the same key behave the same from then on.
 */
export interface Node {
  readonly key: string;
  readonly snapshot: AnyMachineSnapshot;
  readonly timers: readonly Timer[];
  readonly memory: readonly unknown[];
  readonly broken?: { readonly invariant: string; readonly message: string };
  /** Names of the progress properties whose `after` matched the step into this node. */
  readonly triggered: readonly string[];
  /** The step into this node: its event and what it emitted (for counter-examples). */
  readonly event: EventObject;
  readonly emitted: readonly EventObject[];
}

export const INIT: EventObject = { type: "xstate.init" };

/** The timer events are `xstate.after.<delay>.<state>`; anything else is sent by the world. */
export const isTimer = (event: EventObject): boolean => event.type.startsWith("xstate.after.");

/**
 * The machine run with the model's monitors beside it, as xstate actor logic: a pure
 * transition over nodes, which xstate's graph utilities can traverse like any machine.
 * Time is abstracted away: any pending timer may fire at any moment, before or after
 * any event, which covers every real ordering (and some that a clock would rule out).
 */
export function productLogic(model: Model) {
  const initial = (): Node => {
    const { scope, actions } = collecting();
    const snapshot = model.machine.getInitialSnapshot(scope, model.input);
    return advance(model, undefined, INIT, snapshot, actions);
  };
  return fromTransition((node: Node, event: EventObject): Node => {
    if (node.broken || node.snapshot.status !== "active") return node;
    const { scope, actions } = collecting();
    const snapshot = model.machine.transition(node.snapshot, event, scope);
    return advance(model, node, event, snapshot, actions);
  }, initial);
}

let inert: ReturnType<typeof createEmptyActor> | undefined;

/**
 * A scope that runs nothing and records the actions a step would run. (xstate's own
 * `transition()` first builds a throw-away actor of the machine without its input: a
 * machine whose delays read an input-made context can loop there.)
 */
function collecting(): { scope: AnyActorScope; actions: Array<{ type: string; params?: unknown }> } {
  inert ??= createEmptyActor();
  const actions: Array<{ type: string; params?: unknown }> = [];
  const scope = {
    self: inert,
    id: "",
    sessionId: "",
    logger: () => {},
    defer: () => {},
    system: inert.system,
    stopChild: () => {},
    emit: () => {},
    actionExecutor: (action: { type: string; params?: unknown }) => actions.push(action),
  } as unknown as AnyActorScope;
  return { scope, actions };
}

/** The events worth trying in a node: the world's, and each pending timer firing. */
export function eventsIn(model: Model, node: Node): EventObject[] {
  if (node.broken || node.snapshot.status !== "active") return [];
  return [...model.events, ...node.timers.map((t) => t.event)];
}

function advance(
  model: Model,
  from: Node | undefined,
  event: EventObject,
  snapshot: AnyMachineSnapshot,
  actions: ReadonlyArray<{ type: string; params?: unknown }>,
): Node {
  const fired = isTimer(event) ? event.type : undefined;
  let timers = (from?.timers ?? []).filter((t) => t.id !== fired);
  const emitted: EventObject[] = [];
  for (const action of actions) {
    const params = (action.params ?? {}) as { event?: EventObject; id?: string; delay?: number; sendId?: string };
    if (action.type === "xstate.emit" && params.event) emitted.push(params.event);
    else if (action.type === "xstate.raise" && params.delay !== undefined && params.event) {
      const id = params.id ?? params.event.type;
      timers = [...timers.filter((t) => t.id !== id), { id, event: params.event }];
    } else if (action.type === "xstate.cancel") timers = timers.filter((t) => t.id !== params.sendId);
  }
  if (snapshot.status !== "active") timers = [];
  timers.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

  const step: Step = { event, before: from?.snapshot, after: snapshot, emitted };
  let broken: Node["broken"];
  if (snapshot.status === "error")
    broken = { invariant: "the machine does not throw", message: String(snapshot.error) };
  const memory = model.invariants.map((inv, i) => {
    const before = from ? from.memory[i] : inv.initial;
    if (broken) return before;
    const next = inv.step(before, step);
    if (next instanceof Broken) {
      broken = { invariant: inv.name, message: next.message };
      return before;
    }
    return next;
  });
  const triggered = model.progress.filter((p) => p.after(step)).map((p) => p.name);
  const context = (snapshot.context ?? {}) as Record<string, unknown>;
  const key = JSON.stringify([
    snapshot.status,
    snapshot.value,
    model.abstract ? model.abstract(context) : context,
    timers.map((t) => t.id),
    memory,
    broken?.invariant ?? null,
  ]);
  return { key, snapshot, timers, memory, ...(broken ? { broken } : {}), triggered, event, emitted };
}
