import type { AnyStateMachine, InputFrom } from "xstate";
import { startChildMachine } from "../../src/actors/machineActor.js";

/** Runs a pure machine as the gateway does (machineActor.ts), recording what it emits; the test drives it with events. */
export function drive<M extends AnyStateMachine>(machine: M, input: InputFrom<M>) {
  const emitted: Array<{ type: string } & Record<string, unknown>> = [];
  const { actor } = startChildMachine(machine, { input, onEmit: (e) => emitted.push(e as { type: string }) });
  return { actor, emitted, types: () => emitted.map((e) => e.type) };
}
