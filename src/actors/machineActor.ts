import { Effect, type Scope } from "effect";
import {
  type AnyActorRef,
  type AnyStateMachine,
  type Actor,
  createActor,
  type EmittedFrom,
  fromCallback,
  type InputFrom,
} from "xstate";
import { emitTo, hasParent, stopChild } from "../vendor/xstate.js";
import { type ActorRegistry, WatchedActor } from "./registry.js";

type EmitHandlers<M extends AnyStateMachine> = {
  [K in EmittedFrom<M>["type"]]?: (event: Extract<EmittedFrom<M>, { type: K }>) => void;
};

interface StartOptions<M extends AnyStateMachine> {
  readonly input: InputFrom<M>;
  readonly id?: string;
  readonly registry?: ActorRegistry;
  readonly on?: EmitHandlers<M>;
  /** Or one handler for every command (one function per actor instead of one per command). */
  readonly onEmit?: (event: EmittedFrom<M>) => void;
  /**
   * Run inside a shared actor system (see `takeHost`) instead of building one of its own.
   * For actors there are many of (one or two per client connection): a root actor's own
   * system costs about 2 KiB of closures, Maps and Sets (docs/performance.md).
   */
  readonly shared?: boolean;
}

/**
 * Hosts of shared actor systems. An xstate actor created with a `parent` joins the
 * parent's system; a host is a do-nothing callback actor that only exists to be that
 * parent (it ignores what its children tell it: done and error events; each child's
 * owner follows it with `subscribe`, as for a root actor). A system keeps every delayed
 * event of its actors in one table that is scanned when one of them stops, so a host
 * takes at most HOST_CAPACITY live actors; hosts are reused once they have room again.
 */
const HOST_CAPACITY = 64;
interface Host {
  readonly ref: AnyActorRef;
  live: number;
}
const hosts: Host[] = [];
let current: Host | undefined;

function takeHost(): Host {
  if (!current || current.live >= HOST_CAPACITY) {
    current = hosts.find((h) => h.live < HOST_CAPACITY);
    if (!current) {
      current = { ref: createActor(fromCallback(() => {})).start(), live: 0 };
      hosts.push(current);
    }
  }
  current.live++;
  return current;
}

function create<M extends AnyStateMachine>(machine: M, options: StartOptions<M>): { actor: Actor<M>; stop: () => void } {
  const host = options.shared ? takeHost() : undefined;
  const actorOptions = {
    input: options.input,
    ...(options.id ? { id: options.id } : {}),
    ...(host ? { parent: host.ref } : {}),
  };
  // A tracked actor tells the registry of its snapshots itself (registry.ts WatchedActor).
  const actor = new WatchedActor(machine, actorOptions) as unknown as Actor<M>;
  const handlers = options.on as Record<string, ((e: unknown) => void) | undefined> | undefined;
  const onEmit = options.onEmit
    ? (options.onEmit as (e: unknown) => void)
    : handlers
      ? (e: unknown) => handlers[(e as { type: string }).type]?.(e)
      : undefined;
  // One function per actor for what it emits, in place of xstate's Map of Sets (vendor/xstate.ts).
  if (onEmit) emitTo(actor, onEmit);
  const untrack = options.registry?.track(machine.id, actor);
  actor.start();
  // Who the actor runs under until it is stopped; undefined after (stop runs once). Not
  // once(): two more closures per actor, and there are two actors per MQTT connection.
  let under: Host | "root" | undefined = host ?? "root";
  return {
    actor: actor as Actor<M>,
    stop: () => {
      const was = under;
      under = undefined;
      if (was === undefined) return;
      if (was === "root") actor.stop();
      else {
        stopChild(actor);
        was.live--;
      }
      untrack?.();
    },
  };
}

/**
 * Starts a machine as an actor owned by the current Scope: when the scope closes, for
 * whatever reason, the actor stops and leaves the registry. The machine stays pure; its
 * emitted commands are carried out by the handlers the edge passes in.
 */
export const startMachine = <M extends AnyStateMachine>(
  machine: M,
  options: StartOptions<M>,
): Effect.Effect<Actor<M>, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => create(machine, options)),
    ({ stop }) => Effect.sync(stop),
  ).pipe(Effect.map(({ actor }) => actor));

/**
 * Waits until the actor reaches a final state (or stops); a machine error becomes a
 * defect. `onDone` runs then (no continuation is held for it while the actor lives).
 */
export const awaitDone = (actor: Actor<AnyStateMachine>, onDone?: () => void): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const done = () => resume(onDone ? Effect.sync(onDone) : Effect.void);
    const unwatch = whenEnded(actor, (e) => (e === undefined ? done() : resume(Effect.die(e))));
    return Effect.sync(unwatch);
  });

/**
 * Calls `f` once when the actor ends: done or stopped (no argument), or failed (its error);
 * at once when it already has. An actor made here under a shared host tells its one owner
 * directly (registry.ts `WatchedActor.onEnd`); any other, or a second owner, through `subscribe`.
 * Returns what stops the watch.
 */
export function whenEnded(actor: AnyActorRef, f: (error?: unknown) => void): () => void {
  const status = actor.getSnapshot().status;
  if (status !== "active") {
    f(status === "error" ? (actor.getSnapshot() as { error?: unknown }).error : undefined);
    return () => {};
  }
  // A root actor keeps an observer: without one, xstate would report its error as unhandled.
  if (actor instanceof WatchedActor && actor.onEnd === undefined && hasParent(actor)) {
    actor.onEnd = f;
    return () => {
      if (actor.onEnd === f) actor.onEnd = undefined;
    };
  }
  const sub = actor.subscribe({ complete: () => f(), error: (e) => f(e ?? new Error("machine failed")) });
  return () => sub.unsubscribe();
}

/**
 * Starts a sub-machine from inside an actor that already runs (a connection's session):
 * the caller owns it and calls the returned stop from its own finalizer.
 */
export function startChildMachine<M extends AnyStateMachine>(
  machine: M,
  options: Omit<StartOptions<M>, "id">,
): { actor: Actor<M>; stop: () => void } {
  return create(machine, options);
}
