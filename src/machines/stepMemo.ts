import type { AnyMachineSnapshot, EventObject } from "xstate";
import { PlainTable } from "./plainTable.js";
import type { Step } from "./step.js";

/**
 * Steps already taken, reused. A machine is pure (src/machines): the same configuration,
 * context and event give the same next snapshot and the same commands. A reconnect storm
 * takes the same few steps ten thousand times (each session's LOADED and RESUMED, each
 * parked reader's ADOPT, from contexts that differ in nothing), and one xstate macrostep
 * costs 5-13 µs and about 17 KB of garbage (docs/performance.md); a hit costs a lookup.
 *
 * Keyed by the context object itself: actors started from equal plain inputs share their
 * initial snapshot (machineActor.ts), and a step reused shares its next one, so actors
 * that went the same way hold the very same context; a key of its value would cost more
 * than the step saves. The event is keyed by value, when it is made of plain values. A
 * step's timers are part of it (a delay is a function of the context: a jittered wait's
 * draw comes in the event that starts it, storedDelivery.ts); a step that runs a custom
 * action is not kept. What is kept is frozen, so an edge that changed a shared context or
 * command in place would fail loudly instead of touching another actor's.
 *
 * One bounded table for all machines, and a context known by a number: a table per context
 * would keep the next context alive, and its table the one after, so an actor stepping on
 * for days would leave the whole chain behind it. Here what the table holds is what it
 * holds: at most 1,024 steps. The event is found by its hash and compared as data
 * (plainTable.ts): no key string is built per step.
 */
/** The hot steps of a storm are a handful; the rest come and go. Cleared when full. */
const steps = new PlainTable<Step>(1024, "clear");

/** Each configuration's shared `_nodes` (step.ts `shared`), and each context, numbered once. */
const ids = new WeakMap<object, number>();
let nextId = 0;
function idOf(o: object): number {
  let id = ids.get(o);
  if (id === undefined) {
    id = nextId++;
    ids.set(o, id);
  }
  return id;
}

/** Where a step from one snapshot on one event is kept: its context's and configuration's numbers, and the event's hash with them. */
export interface MemoKey {
  readonly context: number;
  readonly nodes: number;
  readonly hash: number;
}

/** The key of a step from `snapshot` on `event`, or undefined when it may not be kept. */
export function memoKey(snapshot: AnyMachineSnapshot, event: EventObject): MemoKey | undefined {
  if (snapshot.status !== "active" || typeof snapshot.context !== "object" || snapshot.context === null)
    return undefined;
  // A history value or a child actor is more than the key says (no machine in src/machines has either).
  if (!isEmpty(snapshot.historyValue) || !isEmpty(snapshot.children)) return undefined;
  // A context met for the first time is most likely one actor's own (a connection's, which
  // holds its client id): its step is taken and not kept, so steps that can never recur
  // neither cost a key nor push the storm's hot steps out of the table. Met again, it is
  // shared (machineActor.ts shares initial snapshots, and a step kept shares its next one).
  const context = ids.get(snapshot.context);
  if (context === undefined) {
    ids.set(snapshot.context, nextId++);
    return undefined;
  }
  const nodes = idOf(snapshot._nodes);
  const hash = steps.hash(event, context, nodes);
  return hash === undefined ? undefined : { context, nodes, hash };
}

/** No own enumerable key (an empty history value, no children). */
export function isEmpty(o: object | undefined): boolean {
  for (const _ in o) return false;
  return true;
}

/** The step kept under `key` for an event equal to `event`. */
export function recall(key: MemoKey, event: EventObject): Step | undefined {
  return steps.get(key.hash, event, key.context, key.nodes);
}

/** Keeps `taken` (the step from `snapshot` on `event`) under `key` unless it runs a custom action. */
export function remember(snapshot: AnyMachineSnapshot, key: MemoKey, event: EventObject, taken: Step): void {
  for (const effect of taken.effects) if (effect.kind === "run") return;
  Object.freeze(snapshot.context);
  Object.freeze(taken.snapshot.context);
  for (const effect of taken.effects)
    if (effect.kind === "emit" || effect.kind === "schedule") Object.freeze(effect.event);
  steps.set(key.hash, event, taken, key.context, key.nodes);
}
