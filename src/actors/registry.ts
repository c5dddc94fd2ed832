import type { AnyStateMachine } from "xstate";
import type { MachineActor, SnapshotWatcher } from "./machineActor.js";
import { RecentTransitions, type Transition } from "./recentTransitions.js";

type AnyActor = MachineActor<AnyStateMachine>;

/** A transition of one tracked actor, for whoever follows them all (the live statecharts page). */
export interface ActorTransition extends Transition {
  readonly machine: string;
  readonly actor: AnyActor;
}

/** How many transitions each actor remembers for the drill-down. */
const RECENT = 16;

/**
 * Every live machine actor, by machine id. Metrics and the live statecharts page read
 * state counts from here on demand, so nothing is counted on the per-message path.
 */
export class ActorRegistry {
  private readonly byMachine = new Map<string, Set<AnyActor>>();
  private readonly listeners = new Set<(t: ActorTransition) => void>();
  private readonly history = new Map<AnyActor, Entry>();
  /** Entries into each state (dotted path, parents included), per machine, since start: rates per state. */
  private readonly entries = new Map<string, Map<string, number>>();

  /** Tracks the actor until `untrack(actor)` (its `retire()` calls it through the entry: no closure per actor). */
  track(machineId: string, actor: AnyActor): void {
    let set = this.byMachine.get(machineId);
    if (!set) {
      set = new Set();
      this.byMachine.set(machineId, set);
    }
    set.add(actor);
    const entry = new Entry(this, machineId, actor);
    this.history.set(actor, entry);
    // Watched from its start, whether or not anyone listens yet, so a page opened later
    // still shows how an actor got where it is. Machines hear lifecycle events only (the
    // per-message work is plain functions in the actors), so this is off the hot path.
    actor.watcher = entry;
  }

  /** The actor leaves the registry; its last transition says so, once. */
  untrack(actor: AnyActor): void {
    const entry = this.history.get(actor);
    if (!entry) return;
    this.byMachine.get(entry.machine)?.delete(actor);
    this.history.delete(actor);
    // An actor tells its watcher of its final snapshot before its owner hears of the end.
    entry.leave();
  }

  /** The remembered transitions of a tracked actor, oldest first. */
  recent(actor: AnyActor): Transition[] {
    return this.history.get(actor)?.recent?.toArray() ?? [];
  }

  /** The tracked actor with this id (the id given to startMachine), and its machine. */
  find(actorId: string): { machine: string; actor: AnyActor } | undefined {
    for (const [machine, actors] of this.byMachine) {
      for (const actor of actors) if (actor.id === actorId) return { machine, actor };
    }
    return undefined;
  }

  /** The tracked actors whose id starts with this (a client's sessions and links: `<connection actor id>/`). */
  findByPrefix(prefix: string): Array<{ machine: string; actor: AnyActor }> {
    const out: Array<{ machine: string; actor: AnyActor }> = [];
    for (const [machine, actors] of this.byMachine) {
      for (const actor of actors) if (actor.id.startsWith(prefix)) out.push({ machine, actor });
    }
    return out;
  }

  /** State name -> number of actors, per machine id. */
  counts(): Record<string, Record<string, number>> {
    const out: Record<string, Record<string, number>> = {};
    for (const [machine, actors] of this.byMachine) {
      const counts: Record<string, number> = {};
      for (const actor of actors) {
        const snap = actor.getSnapshot();
        const name = snap.status === "active" ? stateName(snap.value) : snap.status;
        counts[name] = (counts[name] ?? 0) + 1;
      }
      out[machine] = counts;
    }
    return out;
  }

  /**
   * Actors per full configuration (every active state of every parallel region, joined
   * by " | "), per machine id: what the live page needs to count parallel states right.
   */
  configurations(): Record<string, Record<string, number>> {
    const out: Record<string, Record<string, number>> = {};
    for (const [machine, actors] of this.byMachine) {
      const counts: Record<string, number> = {};
      for (const actor of actors) {
        const name = configuration(actor.getSnapshot());
        counts[name] = (counts[name] ?? 0) + 1;
      }
      out[machine] = counts;
    }
    return out;
  }

  /** The live actors of one machine (for views that walk them once, such as /clients). */
  actorsOf(machineId: string): Iterable<AnyActor> {
    return this.byMachine.get(machineId) ?? [];
  }

  /** When each tracked actor entered its current state (ms since the epoch), for "since" columns. */
  enteredAt(actor: AnyActor): number | undefined {
    return this.history.get(actor)?.recent?.lastAt();
  }

  size(machineId: string): number {
    return this.byMachine.get(machineId)?.size ?? 0;
  }

  /** Every transition of every tracked actor from now on, including actors already live; returns the unsubscribe. */
  onTransition(listener: (t: ActorTransition) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** How many times actors entered each state, per machine id (a state's parents count too). */
  entered(): Record<string, Record<string, number>> {
    const out: Record<string, Record<string, number>> = {};
    for (const [machine, counts] of this.entries) out[machine] = Object.fromEntries(counts);
    return out;
  }

  /** @internal (Entry's) */
  record(entry: Entry, event: string, to: string): void {
    const at = Date.now();
    const from = entry.state;
    to = intern(to);
    let counts = this.entries.get(entry.machine);
    if (!counts) {
      counts = new Map();
      this.entries.set(entry.machine, counts);
    }
    for (const path of enteredPaths(from, to)) counts.set(path, (counts.get(path) ?? 0) + 1);
    entry.state = to;
    // Most actors make a handful of transitions: the ring grows as they come, up to RECENT.
    entry.recent ??= new RecentTransitions(RECENT);
    entry.recent.add(at, event, from, to);
    if (this.listeners.size === 0) return;
    const change: ActorTransition = { at, event, from, to, machine: entry.machine, actor: entry.actor };
    for (const l of this.listeners) l(change);
  }
}

type Snapshot = { status: string; value?: unknown };

/** One tracked actor: its state's name and its recent transitions. */
class Entry implements SnapshotWatcher {
  state = "";
  recent: RecentTransitions | undefined = undefined;
  /** Until the actor leaves the registry: snapshots after that (none but the final one) are not news. */
  private registry: ActorRegistry | undefined;

  constructor(
    registry: ActorRegistry,
    readonly machine: string,
    readonly actor: AnyActor,
  ) {
    this.registry = registry;
  }

  /** Each new snapshot of the actor, with the event that made it. */
  seen(snapshot: Snapshot, event: { type: string }): void {
    const to = configuration(snapshot);
    // Re-entering the same state (keep-alive activity) is not news.
    if (to !== this.state) this.registry?.record(this, event.type, to);
  }

  untrack(): void {
    this.registry?.untrack(this.actor);
  }

  /** The actor left the registry: the last transition says so, and nothing after it is recorded. */
  leave(): void {
    const registry = this.registry;
    this.registry = undefined;
    registry?.record(this, "left", "");
  }
}

/** The states a transition enters: in `to` and not in `from`, parents included. Cached: configurations are few. */
const entering = new Map<string, Map<string, readonly string[]>>();
let enteringSize = 0;
function enteredPaths(from: string, to: string): readonly string[] {
  let fromHere = entering.get(from);
  const known = fromHere?.get(to);
  if (known) return known;
  const withParents = (config: string) => {
    const paths = new Set<string>();
    if (config === "") return paths;
    for (const leaf of config.split(" | ")) {
      const parts = leaf.split(".");
      for (let i = 1; i <= parts.length; i++) paths.add(parts.slice(0, i).join("."));
    }
    return paths;
  };
  const before = withParents(from);
  const paths = [...withParents(to)].filter((p) => !before.has(p));
  if (enteringSize < 4096) {
    if (!fromHere) {
      fromHere = new Map();
      entering.set(from, fromHere);
    }
    fromHere.set(to, paths);
    enteringSize++;
  }
  return paths;
}

/** Configuration names are few; thousands of actors in the same state share one string. */
const names = new Map<string, string>();
function intern(name: string): string {
  const known = names.get(name);
  if (known !== undefined) return known;
  if (names.size < 4096) names.set(name, name);
  return name;
}

/** `{ serving: { nats: "online", keepalive: "waiting" } }` -> `serving.nats.online | serving.keepalive.waiting`. */
export function configuration(snapshot: { status: string; value?: unknown }): string {
  if (snapshot.status !== "active" && snapshot.status !== "done") return snapshot.status;
  // A machine in a top-level atomic state (most snapshots of most machines) names it itself.
  const value = snapshot.value;
  if (typeof value === "string") return value;
  // Snapshots of one configuration share their value object (machines/step.ts `shared`).
  const known = value && typeof value === "object" ? configurationNames.get(value) : undefined;
  if (known !== undefined) return known;
  const paths: string[] = [];
  walkConfiguration(value, "", paths);
  const name = paths.join(" | ");
  if (value && typeof value === "object") configurationNames.set(value, name);
  return name;
}
const configurationNames = new WeakMap<object, string>();

function walkConfiguration(value: unknown, prefix: string, paths: string[]): void {
  if (value && typeof value === "object") {
    for (const key in value) walkConfiguration((value as Record<string, unknown>)[key], `${prefix}${key}.`, paths);
  } else paths.push(`${prefix}${String(value)}`);
}

/** `{ serving: "idle" }` -> `serving.idle`: one flat name per leaf state. */
export function stateName(value: unknown): string {
  if (typeof value === "string") return value;
  if (value && typeof value === "object") {
    const [key, child] = Object.entries(value)[0] ?? [];
    if (key === undefined) return "";
    const rest = stateName(child);
    return rest ? `${key}.${rest}` : key;
  }
  return String(value);
}
