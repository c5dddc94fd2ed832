import type { AnyEventObject, AnyMachineSnapshot, AnyStateMachine, EventObject } from "xstate";

/**
 * What a model checker needs to know of one machine beyond its definition: what the
 * world may send it (events with their payloads abstracted to a few representative
 * ones), how to start it, which part of its context matters, and what must hold.
 */
export interface Model {
  readonly machine: AnyStateMachine;
  /** Defaults to the machine's id; set when one machine is checked with several inputs. */
  readonly name?: string;
  readonly input?: unknown;
  /** Every event the edges may send, in any state, in any order. Timers are added by the checker. */
  readonly events: readonly AnyEventObject[];
  /** The context as far as behaviour depends on it (counters capped, lists as sets); default: all of it. */
  readonly abstract?: (context: Record<string, unknown>) => unknown;
  /** The bound of the exploration, in words, printed with the result. */
  readonly bound: string;
  readonly invariants: readonly Invariant[];
  readonly progress: readonly Progress[];
}

/** One step of the machine as an invariant sees it: the event, the snapshots around it, what it emitted. */
export interface Step {
  readonly event: EventObject;
  /** undefined for the machine's start (event `xstate.init`). */
  readonly before: AnyMachineSnapshot | undefined;
  readonly after: AnyMachineSnapshot;
  /** Emitted events in the order the machine emitted them. */
  readonly emitted: readonly EventObject[];
}

/** Returned by an invariant's step to say the step broke it. */
export class Broken {
  constructor(readonly message: string) {}
}

/**
 * A safety property written as code: a small memory of the path so far (plain JSON, it is
 * part of the explored state) and a step function that updates it or says what broke.
 */
export interface Invariant<M = unknown> {
  readonly name: string;
  readonly initial: M;
  readonly step: (memory: M, step: Step) => M | Broken;
}

export const invariant = <M>(name: string, initial: M, step: (memory: M, step: Step) => M | Broken): Invariant =>
  ({ name, initial, step }) as Invariant;

/**
 * A progress property: from every state reachable once `after` matched a step, a state
 * where `reach` holds (default: a final state) can still be reached through timers and
 * the events `using` allows (default: timers alone). "No deadlock" is `after` always and
 * `using` everything.
 */
export interface Progress {
  readonly name: string;
  readonly after: (step: Step) => boolean;
  readonly using?: (event: EventObject) => boolean;
  readonly reach?: (snapshot: AnyMachineSnapshot) => boolean;
}

/** The progress every terminating machine gets: whatever has happened, it can still end. */
export const canAlwaysEnd: Progress = {
  name: "can always still reach a final state (no deadlock)",
  after: () => true,
  using: () => true,
};

/** An event may happen at most `max` times along any path. */
export const atMost = (name: string, type: string, max = 1): Invariant =>
  invariant(name, 0, (n: number, step) => {
    const total = n + count(step, type);
    return total > max ? new Broken(`${type} ${total} times`) : total;
  });

/** Once `since` has held for a step (`what` names it), no later step may emit any of `types`. */
export const neverAfter = (
  name: string,
  what: string,
  since: (step: Step) => boolean,
  types: readonly string[],
): Invariant =>
  invariant(name, false, (seen: boolean, step) => {
    const bad = types.find((t) => emits(step, t));
    if (seen && bad) return new Broken(`${bad} after ${what}`);
    return seen || since(step);
  });

/** Every emit of `type` comes after `since` has held for some earlier (or the same) step. */
export const onlyAfter = (name: string, type: string, since: (step: Step) => boolean): Invariant =>
  invariant(name, false, (seen: boolean, step) => {
    const now = seen || since(step);
    return !now && emits(step, type) ? new Broken(`${type} too early (${step.event.type})`) : now;
  });

/** What an invariant broke, and where: the first one a step breaks wins. */
export interface BrokenInvariant {
  readonly invariant: string;
  readonly message: string;
}

/**
 * Runs each invariant's step on its memory (of one machine's steps or a system's): the
 * memories after the step, and the first invariant the step broke (`already`: broken
 * before any of them ran, a machine that threw). A broken invariant keeps its old memory.
 */
export function stepInvariants<S>(
  invariants: ReadonlyArray<{
    readonly name: string;
    readonly initial: unknown;
    readonly step: (memory: never, step: S) => unknown;
  }>,
  before: readonly unknown[] | undefined,
  step: S,
  already?: BrokenInvariant,
): { memory: unknown[]; broken: BrokenInvariant | undefined } {
  let broken = already;
  const memory = invariants.map((inv, i) => {
    const was = before ? before[i] : inv.initial;
    if (broken) return was;
    const next = inv.step(was as never, step);
    if (next instanceof Broken) {
      broken = { invariant: inv.name, message: next.message };
      return was;
    }
    return next;
  });
  return { memory, broken };
}

// -- small words for writing invariants ------------------------------------------

/** An event's payload fields, for an invariant that reads them. */
export const fields = (e: EventObject): Readonly<Record<string, unknown>> => e as unknown as Record<string, unknown>;

export const emits = (step: Step, type: string): boolean => step.emitted.some((e) => e.type === type);

export const emitsWhere = <E extends EventObject>(step: Step, type: string, where: (e: E) => boolean): boolean =>
  step.emitted.some((e) => e.type === type && where(e as E));

export const count = (step: Step, type: string): number => step.emitted.filter((e) => e.type === type).length;

/** The step's event arrived while the machine was in `state` (and so was not ignored at the door). */
export const inState = (snapshot: AnyMachineSnapshot | undefined, state: string): boolean =>
  snapshot !== undefined && snapshot.status === "active" && snapshot.matches(state as never);
