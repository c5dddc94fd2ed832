import { Effect, type Scope } from "effect";
import type {
  AnyMachineSnapshot,
  AnyStateMachine,
  EmittedFrom,
  EventFromLogic,
  EventObject,
  InputFrom,
  SnapshotFrom,
} from "xstate";
import { PlainTable } from "../machines/plainTable.js";
import { INIT, initialStep, STOP, type Step, type Effect as StepEffect, step } from "../machines/step.js";
import type { ActorRegistry } from "./registry.js";

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
  /** Or an object whose `command` takes every command: no closure per actor (one per connection adds up). */
  readonly commands?: CommandTaker<EmittedFrom<M>>;
  /** Where delays are timed (a test's simulated clock); the process's timers by default. */
  readonly clock?: Clock;
}

/** What times an actor's delays: the process's timers, or a test's clock (xstate's `SimulatedClock` is one). */
export interface Clock {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(id: unknown): void;
}

const processTimers: Clock = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (id) => clearTimeout(id as ReturnType<typeof setTimeout>),
};

/** Who follows an actor's snapshots (the registry's entry for the live statecharts page). */
export interface SnapshotWatcher {
  seen(snapshot: { status: string; value?: unknown }, event: { type: string }): void;
  /** The actor was retired: it leaves whatever tracks it. */
  untrack?(): void;
}

/** An object that takes an actor's commands (its edge), in place of a handler closure. */
export interface CommandTaker<E> {
  command(event: E): void;
}

/** An object told once when an actor ends (no argument: done or stopped; else its error), in place of a closure. */
export interface EndListener {
  ended(error?: unknown): void;
}
type OnEnd = ((error?: unknown) => void) | EndListener;
const tell = (to: OnEnd, error: unknown): void => (typeof to === "function" ? to(error) : to.ended(error));

let nextId = 0;

/**
 * A machine run as an actor: its own mailbox (an event sent while it takes one waits its
 * turn, so events are taken one at a time, in order), its timers, and its commands (what
 * the machine emits) handed to the one handler its edge gave, after the snapshot moved.
 * Each event is one pure step (machines/step.ts); nothing of xstate's `Actor` runs, so an
 * actor is a snapshot, a handler and what is pending, and there is no actor system.
 *
 * A command handler or custom action that throws fails the actor (status "error"): its
 * owner hears the error (`whenEnded`) and ends what it supervises, and the process stays up.
 */
export class MachineActor<M extends AnyStateMachine> {
  readonly id: string;
  /** Told each new snapshot with the event that made it (registry.ts), from the first. */
  watcher: SnapshotWatcher | undefined = undefined;
  private snapshot: AnyMachineSnapshot;
  /** Events that arrived while a step was being taken (or before start). */
  private mailbox: EventObject[] | undefined = undefined;
  private stepping = true;
  private over = false;
  private timers: Map<string, unknown> | undefined = undefined;
  /** One listener (the owner, nearly always), or several. */
  private ends: OnEnd | OnEnd[] | undefined = undefined;
  /** Until `start` carries it out; then let go (the actor keeps only its current snapshot). */
  private initial: Step | undefined;

  constructor(
    readonly machine: M,
    input: InputFrom<M>,
    private readonly onEmit: ((event: EmittedFrom<M>) => void) | CommandTaker<EmittedFrom<M>> | undefined,
    id?: string,
    private readonly clock: Clock = processTimers,
  ) {
    this.id = id ?? `x:${nextId++}`;
    this.initial = initialStepOf(machine, input);
    this.snapshot = this.initial.snapshot;
  }

  /** Carries out what the initial state asks, then the events sent meanwhile. */
  start(): this {
    const initial = this.initial;
    this.initial = undefined;
    if (initial) this.settle(initial, INIT);
    this.drain();
    return this;
  }

  send(event: EventFromLogic<M>): void {
    if (this.over) return;
    if (this.stepping) {
      this.mailbox ??= [];
      this.mailbox.push(event);
      return;
    }
    this.stepping = true;
    this.take(event);
    this.drain();
  }

  getSnapshot(): SnapshotFrom<M> {
    return this.snapshot as SnapshotFrom<M>;
  }

  /** Ends the actor where it is (status "stopped"): no timer fires and no event is taken after. */
  stop(): void {
    if (this.over) return;
    try {
      this.snapshot = step(this.machine, this.snapshot, STOP).snapshot;
    } catch {
      this.snapshot = { ...this.snapshot, status: "stopped" } as unknown as AnyMachineSnapshot;
    }
    this.finish(undefined);
  }

  /**
   * Stops the actor and takes it out of the registry that tracks it, once: what the
   * owner of a started machine calls (a method, not a closure per actor).
   */
  retire(): void {
    this.stop();
    const watcher = this.watcher;
    this.watcher = undefined;
    watcher?.untrack?.();
  }

  /** Calls `f` once when the actor ends (done or stopped: no argument; failed: its error); at once if it has. */
  whenEnded(f: OnEnd): () => void {
    this.listenEnd(f);
    return () => this.unlistenEnd(f);
  }

  /** `whenEnded` without the closure that undoes it: `unlistenEnd(f)` does. */
  listenEnd(f: OnEnd): void {
    if (this.over) return tell(f, this.snapshot.status === "error" ? this.snapshot.error : undefined);
    const ends = this.ends;
    if (ends === undefined) this.ends = f;
    else if (Array.isArray(ends)) ends.push(f);
    else this.ends = [ends, f];
  }

  unlistenEnd(f: OnEnd): void {
    const ends = this.ends;
    if (ends === f) this.ends = undefined;
    else if (Array.isArray(ends)) {
      const i = ends.indexOf(f);
      if (i >= 0) ends.splice(i, 1);
    }
  }

  private drain(): void {
    for (let e = this.mailbox?.shift(); e !== undefined && !this.over; e = this.mailbox?.shift()) this.take(e);
    this.stepping = false;
  }

  private take(event: EventObject): void {
    let next: Step;
    try {
      next = step(this.machine, this.snapshot, event);
    } catch (e) {
      return this.fail(e);
    }
    this.settle(next, event);
  }

  private settle({ snapshot, effects }: Step, event: EventObject): void {
    this.snapshot = snapshot;
    for (const effect of effects) {
      if (this.over) return;
      this.carryOut(effect);
    }
    if (this.over) return;
    this.watcher?.seen(snapshot, event);
    if (snapshot.status !== "active") this.finish(undefined);
  }

  private carryOut(effect: StepEffect): void {
    switch (effect.kind) {
      case "emit":
        try {
          const to = this.onEmit;
          if (typeof to === "function") to(effect.event as EmittedFrom<M>);
          else to?.command(effect.event as EmittedFrom<M>);
        } catch (e) {
          this.fail(e);
        }
        return;
      case "schedule": {
        this.timers ??= new Map();
        const timers = this.timers;
        if (timers.has(effect.id)) this.clock.clearTimeout(timers.get(effect.id));
        const { id, event } = effect;
        timers.set(
          id,
          this.clock.setTimeout(() => {
            this.timers?.delete(id);
            this.send(event as EventFromLogic<M>);
          }, effect.delay),
        );
        return;
      }
      case "cancel":
        if (this.timers?.has(effect.id)) this.clock.clearTimeout(this.timers.get(effect.id));
        this.timers?.delete(effect.id);
        return;
      case "run":
        try {
          effect.exec();
        } catch (e) {
          this.fail(e);
        }
    }
  }

  private fail(error: unknown): void {
    if (this.over) return;
    this.snapshot = { ...this.snapshot, status: "error", error };
    this.finish(error);
  }

  private finish(error: unknown): void {
    this.over = true;
    this.mailbox = undefined;
    if (this.timers) for (const t of this.timers.values()) this.clock.clearTimeout(t);
    this.timers = undefined;
    const ends = this.ends;
    this.ends = undefined;
    if (Array.isArray(ends)) for (const f of ends) tell(f, error);
    else if (ends) tell(ends, error);
  }
}

/**
 * A machine's initial step for an input of plain values, computed once and shared: a
 * machine is pure, so the same input gives the same snapshot and commands, and snapshots
 * are never changed in place (each step makes new ones). Every connection starts two to
 * four machines; their initial snapshots were 9 % of the gateway's CPU in a reconnect storm.
 * At most INITIAL_STEPS_KEPT inputs per machine are kept (an AMQP session's channel varies).
 */
function initialStepOf(machine: AnyStateMachine, input: unknown): Step {
  let byInput = initialSteps.get(machine);
  if (!byInput) {
    byInput = new PlainTable(INITIAL_STEPS_KEPT, "keep");
    initialSteps.set(machine, byInput);
  }
  const hash = byInput.hash(input);
  if (hash === undefined) return initialStep(machine, input);
  let found = byInput.get(hash, input);
  if (!found) {
    found = initialStep(machine, input);
    if (!found.effects.some((e) => e.kind === "run")) byInput.set(hash, input, found);
  }
  return found;
}
const initialSteps = new WeakMap<AnyStateMachine, PlainTable<Step>>();
const INITIAL_STEPS_KEPT = 64;

/** A started actor (tracked by the registry if one is given); its owner ends it with `retire()`. */
function create<M extends AnyStateMachine>(machine: M, options: StartOptions<M>): MachineActor<M> {
  const handlers = options.on as Record<string, ((e: unknown) => void) | undefined> | undefined;
  const onEmit =
    options.commands ??
    options.onEmit ??
    (handlers ? (e: EmittedFrom<M>) => handlers[(e as { type: string }).type]?.(e) : undefined);
  const actor = new MachineActor(machine, options.input, onEmit, options.id, options.clock);
  options.registry?.track(machine.id, actor);
  return actor.start();
}

const retire = (actor: MachineActor<AnyStateMachine>) => Effect.sync(() => actor.retire());

/**
 * Starts a machine as an actor owned by the current Scope: when the scope closes, for
 * whatever reason, the actor stops and leaves the registry. The machine stays pure; its
 * emitted commands are carried out by the handlers the edge passes in.
 */
export const startMachine = <M extends AnyStateMachine>(
  machine: M,
  options: StartOptions<M>,
): Effect.Effect<MachineActor<M>, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => create(machine, options)),
    retire,
  );

/**
 * Waits until the actor reaches a final state (or stops); a failed actor becomes a
 * defect. `onDone` runs then (no continuation is held for it while the actor lives).
 */
export const awaitDone = (actor: MachineActor<AnyStateMachine>, onDone?: () => void): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const done = () => resume(onDone ? Effect.sync(onDone) : Effect.void);
    const unwatch = actor.whenEnded((e) => (e === undefined ? done() : resume(Effect.die(e))));
    return Effect.sync(unwatch);
  });

/** Calls `f` once when the actor ends: done or stopped (no argument), or failed (its error). Returns what stops the watch. */
export function whenEnded(actor: MachineActor<AnyStateMachine>, f: (error?: unknown) => void): () => void {
  return actor.whenEnded(f);
}

/**
 * Starts a sub-machine from inside an actor that already runs (a connection's session):
 * the caller owns it and calls the returned stop from its own finalizer.
 */
export function startChildMachine<M extends AnyStateMachine>(
  machine: M,
  options: StartOptions<M>,
): { actor: MachineActor<M>; stop: () => void } {
  const actor = create(machine, options);
  return { actor, stop: () => actor.retire() };
}

/** `startChildMachine` for an owner that keeps the actor and ends it with `actor.retire()` (no closure). */
export function startOwnedMachine<M extends AnyStateMachine>(machine: M, options: StartOptions<M>): MachineActor<M> {
  return create(machine, options);
}
