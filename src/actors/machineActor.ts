import { Effect, type Scope } from "effect";
import { type AnyStateMachine, type Actor, createActor, type EmittedFrom, type InputFrom } from "xstate";
import type { ActorRegistry } from "./registry.js";

type EmitHandlers<M extends AnyStateMachine> = {
  [K in EmittedFrom<M>["type"]]?: (event: Extract<EmittedFrom<M>, { type: K }>) => void;
};

/**
 * Starts a machine as an actor owned by the current Scope: when the scope closes, for
 * whatever reason, the actor stops and leaves the registry. The machine stays pure; its
 * emitted commands are carried out by the handlers the edge passes in.
 */
export const startMachine = <M extends AnyStateMachine>(
  machine: M,
  options: {
    readonly input: InputFrom<M>;
    readonly id?: string;
    readonly registry?: ActorRegistry;
    readonly on?: EmitHandlers<M>;
  },
): Effect.Effect<Actor<M>, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const actor = createActor(machine, { input: options.input, ...(options.id ? { id: options.id } : {}) });
      for (const [type, handler] of Object.entries(options.on ?? {})) {
        if (handler) actor.on(type, handler as (e: unknown) => void);
      }
      const untrack = options.registry?.track(machine.id, actor);
      actor.start();
      return { actor, untrack };
    }),
    ({ actor, untrack }) =>
      Effect.sync(() => {
        actor.stop();
        untrack?.();
      }),
  ).pipe(Effect.map(({ actor }) => actor as Actor<M>));

/** Waits until the actor reaches a final state (or stops); a machine error becomes a defect. */
export const awaitDone = (actor: Actor<AnyStateMachine>): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const sub = actor.subscribe({
      complete: () => resume(Effect.void),
      error: (e) => resume(Effect.die(e)),
    });
    if (actor.getSnapshot().status !== "active") resume(Effect.void);
    return Effect.sync(() => sub.unsubscribe());
  });

/**
 * Starts a sub-machine from inside an actor that already runs (a connection's session):
 * the caller owns it and calls the returned stop from its own finalizer.
 */
export function startChildMachine<M extends AnyStateMachine>(
  machine: M,
  options: { readonly input: InputFrom<M>; readonly registry?: ActorRegistry; readonly on?: EmitHandlers<M> },
): { actor: Actor<M>; stop: () => void } {
  const actor = createActor(machine, { input: options.input });
  for (const [type, handler] of Object.entries(options.on ?? {})) {
    if (handler) actor.on(type, handler as (e: unknown) => void);
  }
  const untrack = options.registry?.track(machine.id, actor);
  actor.start();
  return {
    actor: actor as Actor<M>,
    stop: () => {
      actor.stop();
      untrack?.();
    },
  };
}
