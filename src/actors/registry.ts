import type { AnyActorRef } from "xstate";

/**
 * Every live machine actor, by machine id. Metrics and the live statecharts page read
 * state counts from here on demand, so nothing is counted on the per-message path.
 */
export class ActorRegistry {
  private readonly byMachine = new Map<string, Set<AnyActorRef>>();
  private readonly listeners = new Set<(machine: string, actor: AnyActorRef, state: string) => void>();

  track(machineId: string, actor: AnyActorRef): () => void {
    let set = this.byMachine.get(machineId);
    if (!set) {
      set = new Set();
      this.byMachine.set(machineId, set);
    }
    set.add(actor);
    const sub = this.listeners.size
      ? actor.subscribe((snap) => this.notify(machineId, actor, stateName(snap.value)))
      : undefined;
    return () => {
      sub?.unsubscribe();
      set.delete(actor);
    };
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

  size(machineId: string): number {
    return this.byMachine.get(machineId)?.size ?? 0;
  }

  onTransition(listener: (machine: string, actor: AnyActorRef, state: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private notify(machine: string, actor: AnyActorRef, state: string): void {
    for (const l of this.listeners) l(machine, actor, state);
  }
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
