import { type AnyStateMachine, createActor, type InputFrom } from "xstate";

/** Runs a pure machine, recording what it emits; the test drives it with events. */
export function drive<M extends AnyStateMachine>(machine: M, input: InputFrom<M>) {
  const emitted: Array<{ type: string } & Record<string, unknown>> = [];
  const actor = createActor(machine, { input });
  actor.on("*", (e) => emitted.push(e as { type: string }));
  actor.start();
  return { actor, emitted, types: () => emitted.map((e) => e.type) };
}
