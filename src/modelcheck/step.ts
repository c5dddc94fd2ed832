import {
  type AnyActorScope,
  type AnyMachineSnapshot,
  type AnyStateMachine,
  createEmptyActor,
  type EventObject,
} from "xstate";

/** A delayed event a machine has scheduled and not cancelled. */
export interface Timer {
  readonly id: string;
  readonly event: EventObject;
}

/** One step of one machine: where it is now, what it emitted (in order), which timers are pending. */
export interface MachineStep {
  readonly snapshot: AnyMachineSnapshot;
  readonly emitted: readonly EventObject[];
  readonly timers: readonly Timer[];
}

export const INIT: EventObject = { type: "xstate.init" };

/** The timer events are `xstate.after.<delay>.<state>`; anything else is sent by the world. */
export const isTimer = (event: EventObject): boolean => event.type.startsWith("xstate.after.");

/** The machine's initial snapshot, with what its entry actions emitted and scheduled. */
export function startStep(machine: AnyStateMachine, input: unknown): MachineStep {
  const { scope, actions } = collecting();
  const snapshot = machine.getInitialSnapshot(scope, input);
  return outcome(snapshot, actions, INIT, []);
}

/** One event through `machine.transition`: nothing runs, every action is recorded. */
export function transitionStep(
  machine: AnyStateMachine,
  snapshot: AnyMachineSnapshot,
  timers: readonly Timer[],
  event: EventObject,
): MachineStep {
  const { scope, actions } = collecting();
  const next = machine.transition(snapshot, event, scope);
  return outcome(next, actions, event, timers);
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

function outcome(
  snapshot: AnyMachineSnapshot,
  actions: ReadonlyArray<{ type: string; params?: unknown }>,
  event: EventObject,
  before: readonly Timer[],
): MachineStep {
  const fired = isTimer(event) ? event.type : undefined;
  let timers = before.filter((t) => t.id !== fired);
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
  return { snapshot, emitted, timers };
}
