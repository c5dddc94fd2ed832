import type { AnyMachineSnapshot, AnyStateMachine, EventObject } from "xstate";
import { INIT, initialStep, isTimer, type Step, step } from "../machines/step.js";

export { INIT, isTimer };

/** A delayed event a machine has scheduled and not cancelled. */
export interface Timer {
  readonly id: string;
  readonly event: EventObject;
}

/** One step of one machine as the checker sees it: where it is, what it emitted (in order), which timers are pending. */
export interface MachineStep {
  readonly snapshot: AnyMachineSnapshot;
  readonly emitted: readonly EventObject[];
  readonly timers: readonly Timer[];
}

/** The machine's initial snapshot, with what its entry actions emitted and scheduled. */
export function startStep(machine: AnyStateMachine, input: unknown): MachineStep {
  return outcome(initialStep(machine, input), INIT, []);
}

/** One event through the machine (the stepper the gateway's actors use): nothing runs, every effect is recorded. */
export function transitionStep(
  machine: AnyStateMachine,
  snapshot: AnyMachineSnapshot,
  timers: readonly Timer[],
  event: EventObject,
): MachineStep {
  return outcome(step(machine, snapshot, event), event, timers);
}

/** Timers are a set here: when each fires is the checker's choice, not the delay's. */
function outcome({ snapshot, effects }: Step, event: EventObject, before: readonly Timer[]): MachineStep {
  const fired = isTimer(event) ? event.type : undefined;
  let timers = before.filter((t) => t.id !== fired);
  const emitted: EventObject[] = [];
  for (const effect of effects) {
    if (effect.kind === "emit") emitted.push(effect.event);
    else if (effect.kind === "schedule")
      timers = [...timers.filter((t) => t.id !== effect.id), { id: effect.id, event: effect.event }];
    else if (effect.kind === "cancel") timers = timers.filter((t) => t.id !== effect.id);
  }
  if (snapshot.status !== "active") timers = [];
  timers.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { snapshot, emitted, timers };
}
