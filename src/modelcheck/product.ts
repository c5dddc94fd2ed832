import { type AnyMachineSnapshot, type EventObject, fromTransition } from "xstate";
import { type Model, type Step, stepInvariants } from "./model.js";
import { INIT, isTimer, type MachineStep, startStep, type Timer, transitionStep } from "./step.js";

export { INIT, isTimer };

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

/**
 * The machine run with the model's monitors beside it, as xstate actor logic: a pure
 * transition over nodes, which xstate's graph utilities can traverse like any machine.
 * Time is abstracted away: any pending timer may fire at any moment, before or after
 * any event, which covers every real ordering (and some that a clock would rule out).
 */
export function productLogic(model: Model) {
  const initial = (): Node => advance(model, undefined, INIT, startStep(model.machine, model.input));
  return fromTransition((node: Node, event: EventObject): Node => {
    if (node.broken || node.snapshot.status !== "active") return node;
    return advance(model, node, event, transitionStep(model.machine, node.snapshot, node.timers, event));
  }, initial);
}

/** The events worth trying in a node: the world's, and each pending timer firing. */
export function eventsIn(model: Model, node: Node): EventObject[] {
  if (node.broken || node.snapshot.status !== "active") return [];
  return [...model.events, ...node.timers.map((t) => t.event)];
}

function advance(model: Model, from: Node | undefined, event: EventObject, next: MachineStep): Node {
  const { snapshot, emitted, timers } = next;
  const step: Step = { event, before: from?.snapshot, after: snapshot, emitted };
  const threw =
    snapshot.status === "error"
      ? { invariant: "the machine does not throw", message: String(snapshot.error) }
      : undefined;
  const { memory, broken } = stepInvariants(model.invariants, from?.memory, step, threw);
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
