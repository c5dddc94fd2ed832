import type { EventObject } from "xstate";
import type { Finding, PathStep, Report } from "./check.js";
import { stateLabel } from "./check.js";
import { stepInvariants } from "./model.js";
import { startStep, transitionStep } from "./step.js";
import {
  type ActorState,
  allEnded,
  type Effect,
  type Emission,
  ENDED,
  type Message,
  type SystemEvent,
  type SystemModel,
  type SystemNode,
  type SystemStep,
  THROWS,
  viewOf,
} from "./system.js";

/** Past this many explored states the exploration stops and says the abstraction is too fine. */
export const MAX_SYSTEM_STATES = 400_000;

interface Explored<W> {
  readonly node: SystemNode<W>;
  /** Index of the state this one was first reached from (breadth first: a shortest way). */
  readonly parent: number;
  readonly event: SystemEvent | undefined;
  readonly emitted: readonly Emission[];
}

/**
 * Explores every state of a system reachable through its world events, the delivery of
 * each message in flight and each actor's timers (breadth first, so the first way found
 * to a state is a shortest one), checks each invariant on every step and each progress
 * property on the whole graph, and reports each broken property with a shortest
 * counter-example.
 */
export function checkSystem<W>(model: SystemModel<W>, options: { maxStates?: number } = {}): Report {
  const limit = options.maxStates ?? MAX_SYSTEM_STATES;
  const properties = [...model.invariants.map((i) => i.name), ...model.progress.map((p) => p.name)];
  const base = { machine: model.name, bound: model.bound, properties };
  const explored: Explored<W>[] = [];
  const index = new Map<string, number>();
  const edges: Array<[number, number, SystemEvent]> = [];
  const first = initialNode(model);
  index.set(first.node.key, 0);
  explored.push({ node: first.node, parent: -1, event: undefined, emitted: first.emitted });
  for (let i = 0; i < explored.length; i++) {
    const { node } = explored[i]!;
    if (node.broken) continue;
    for (const event of eventsIn(model, node)) {
      const next = stepNode(model, node, event);
      let at = index.get(next.node.key);
      if (at === undefined) {
        if (explored.length >= limit) {
          const message = `more than ${limit} states; abstract the world or the contexts further`;
          return {
            ...base,
            states: explored.length,
            transitions: edges.length,
            findings: [{ kind: "bound", property: "bounded state space", message, path: [] }],
          };
        }
        at = explored.length;
        index.set(next.node.key, at);
        explored.push({ node: next.node, parent: i, event, emitted: next.emitted });
      }
      if (at !== i) edges.push([i, at, event]);
    }
  }

  const pathTo = (at: number): PathStep[] => {
    const out: PathStep[] = [];
    for (let k = at; k >= 0; k = explored[k]!.parent) out.push(describe(model, explored[k]!));
    return out.reverse();
  };
  const findings: Finding[] = [];
  const firstBroken = new Map<string, number>();
  explored.forEach((e, i) => {
    const b = e.node.broken;
    if (b && !firstBroken.has(b.invariant)) firstBroken.set(b.invariant, i);
  });
  for (const [property, at] of firstBroken) {
    findings.push({ kind: "invariant", property, message: explored[at]!.node.broken!.message, path: pathTo(at) });
  }
  for (const p of model.progress) {
    const stuck = stuckStates(model, p, explored, edges);
    if (stuck === undefined) continue;
    const path = pathTo(stuck);
    findings.push({
      kind: "progress",
      property: p.name,
      message: `stuck in ${path.at(-1)?.state ?? "(start)"}: nothing reachable from there through ${p.using ? "timers, the edges' answers and the events it may rely on" : "timers and the edges' answers alone"} satisfies it`,
      path,
    });
  }
  return { ...base, states: explored.length, transitions: edges.length, findings };
}

/** The first state (in breadth-first order: a nearest one) from which a progress property can no longer be met. */
function stuckStates<W>(
  model: SystemModel<W>,
  p: SystemModel<W>["progress"][number],
  explored: readonly Explored<W>[],
  edges: ReadonlyArray<[number, number, SystemEvent]>,
): number | undefined {
  const reach = p.reach ?? ((v) => allEnded(model, v));
  const allowed = (e: SystemEvent) => e.kind !== "world" || (p.using?.(e) ?? false);
  const forward: number[][] = explored.map(() => []);
  const backward: number[][] = explored.map(() => []);
  for (const [from, to, e] of edges) {
    forward[from]!.push(to);
    if (allowed(e)) backward[to]!.push(from);
  }
  const starts = explored.flatMap((e, i) => (e.node.triggered.includes(p.name) ? [i] : []));
  const after = walk(starts, forward);
  // A broken state is not explored further: its invariant is reported already, and what
  // lies past it is unknown, so it counts as a way out rather than as a dead end.
  const goals = explored.flatMap((e, i) => (e.node.broken || reach(viewOf(e.node)) ? [i] : []));
  const good = walk(goals, backward);
  let nearest: number | undefined;
  for (const i of after) if (!good.has(i) && (nearest === undefined || i < nearest)) nearest = i;
  return nearest;
}

function walk(from: readonly number[], next: readonly (readonly number[])[]): Set<number> {
  const seen = new Set(from);
  const queue = [...from];
  for (let k = queue.pop(); k !== undefined; k = queue.pop()) {
    for (const n of next[k]!) {
      if (!seen.has(n)) {
        seen.add(n);
        queue.push(n);
      }
    }
  }
  return seen;
}

// -- stepping the system ---------------------------------------------------------------

function eventsIn<W>(model: SystemModel<W>, node: SystemNode<W>): SystemEvent[] {
  const out: SystemEvent[] = [];
  const seen = new Set<string>();
  for (const m of node.queued) {
    const k = JSON.stringify(m);
    if (seen.has(k)) continue;
    seen.add(k);
    out.push({ kind: "deliver", to: m.to, event: m.event });
  }
  for (const [actor, a] of Object.entries(node.actors)) {
    if (a?.snapshot.status === "active") for (const t of a.timers) out.push({ kind: "timer", actor, event: t.event });
  }
  for (const w of model.events(viewOf(node))) out.push({ kind: "world", name: w.name });
  return out;
}

/** The system as it runs one step: mutable while the step's effects play out. */
class Run<W> {
  actors: Record<string, ActorState | undefined>;
  world: W;
  queued: Message[];
  readonly emitted: Emission[] = [];
  readonly ended: string[] = [];
  thrown: string | undefined;
  private readonly busy = new Set<string>();
  private readonly mailbox = new Map<string, EventObject[]>();

  constructor(
    private readonly model: SystemModel<W>,
    from: Pick<SystemNode<W>, "actors" | "world" | "queued">,
  ) {
    this.actors = { ...from.actors };
    this.world = from.world;
    this.queued = [...from.queued];
  }

  view() {
    return viewOf<W>(this);
  }

  run(effects: readonly Effect<W>[]): void {
    for (const e of effects) {
      if (e.kind === "send") this.deliver(e.to, e.event);
      else if (e.kind === "post") this.queued.push({ to: e.to, event: e.event });
      else if (e.kind === "postOnce") {
        const k = JSON.stringify(e.event);
        if (!this.queued.some((m) => m.to === e.to && JSON.stringify(m.event) === k))
          this.queued.push({ to: e.to, event: e.event });
      } else if (e.kind === "start") this.start(e.actor, e.input);
      else this.world = e.update(this.world);
    }
  }

  /**
   * As an xstate actor takes an event: at once, its emit handlers running depth first;
   * an event sent to an actor while it is in the middle of a step waits in its mailbox.
   */
  deliver(to: string, event: EventObject): void {
    const spec = this.model.actors[to];
    if (!spec) {
      const handler = this.model.handlers?.[to];
      if (!handler) throw new Error(`model ${this.model.name}: nothing handles messages to ${to}`);
      this.run(handler(event, this.view()));
      return;
    }
    const a = this.actors[to];
    if (a?.snapshot.status !== "active") return;
    if (this.busy.has(to)) {
      (this.mailbox.get(to) ?? this.mailbox.set(to, []).get(to)!).push(event);
      return;
    }
    this.settle(to, transitionStep(spec.machine, a.snapshot, a.timers, event));
  }

  start(actor: string, input: unknown): void {
    const spec = this.model.actors[actor];
    if (!spec) throw new Error(`model ${this.model.name}: no actor ${actor}`);
    if (this.actors[actor]) return;
    this.settle(actor, startStep(spec.machine, input ?? spec.input));
  }

  private settle(actor: string, step: ReturnType<typeof startStep>): void {
    this.busy.add(actor);
    this.actors[actor] = { snapshot: step.snapshot, timers: step.timers };
    if (step.snapshot.status === "error") this.thrown ??= `${actor}: ${String(step.snapshot.error)}`;
    for (const event of step.emitted) {
      this.emitted.push({ actor, event });
      this.run(this.model.route(actor, event, this.view()));
    }
    if (step.snapshot.status === "done") {
      this.ended.push(actor);
      this.run(this.model.route(actor, ENDED, this.view()));
    }
    this.busy.delete(actor);
    const waiting = this.mailbox.get(actor);
    while (waiting?.length) this.deliver(actor, waiting.shift()!);
  }
}

function initialNode<W>(model: SystemModel<W>): { node: SystemNode<W>; emitted: Emission[] } {
  const r = new Run(model, { actors: {}, world: model.world, queued: [] });
  for (const [name, spec] of Object.entries(model.actors)) if (!spec.startsLater) r.start(name, undefined);
  return finish(model, undefined, { kind: "world", name: "(start)" }, r);
}

function stepNode<W>(
  model: SystemModel<W>,
  node: SystemNode<W>,
  event: SystemEvent,
): { node: SystemNode<W>; emitted: Emission[] } {
  const r = new Run(model, node);
  if (event.kind === "deliver") {
    const at = r.queued.findIndex((m) => m.to === event.to && JSON.stringify(m.event) === JSON.stringify(event.event));
    r.queued.splice(at, 1);
    r.deliver(event.to, event.event);
  } else if (event.kind === "timer") r.deliver(event.actor, event.event);
  else {
    const w = model.events(viewOf(node)).find((e) => e.name === event.name);
    if (w) r.run(w.effects);
  }
  return finish(model, node, event, r);
}

function finish<W>(
  model: SystemModel<W>,
  from: SystemNode<W> | undefined,
  event: SystemEvent,
  r: Run<W>,
): { node: SystemNode<W>; emitted: Emission[] } {
  const after = viewOf<W>(r);
  const step: SystemStep<W> = { event, before: from && viewOf(from), after, emitted: r.emitted, ended: r.ended };
  const threw = r.thrown ? { invariant: THROWS, message: r.thrown } : undefined;
  const { memory, broken } = stepInvariants(model.invariants, from?.memory, step, threw);
  const triggered = model.progress.filter((p) => p.after(step)).map((p) => p.name);
  const actors = Object.keys(model.actors).map((name) => {
    const a = r.actors[name];
    if (!a) return 0;
    const spec = model.actors[name]!;
    const context = (a.snapshot.context ?? {}) as Record<string, unknown>;
    return [
      a.snapshot.status,
      a.snapshot.value,
      spec.abstract ? spec.abstract(context) : context,
      a.timers.map((t) => t.id),
    ];
  });
  const queued = r.queued.map((m) => JSON.stringify(m)).sort();
  const key = JSON.stringify([actors, r.world, queued, memory, broken?.invariant ?? null]);
  const node: SystemNode<W> = {
    key,
    actors: r.actors,
    world: r.world,
    queued: r.queued,
    memory,
    ...(broken ? { broken } : {}),
    triggered,
  };
  return { node, emitted: r.emitted };
}

// -- counter-examples ---------------------------------------------------------------------

function describe<W>(model: SystemModel<W>, e: Explored<W>): PathStep {
  const parts = Object.keys(model.actors).map((name) => {
    const a = e.node.actors[name];
    if (!a) return `${name} -`;
    const label = stateLabel(a.snapshot.value);
    return `${name} ${a.snapshot.status === "active" ? label : `${label} (${a.snapshot.status})`}`;
  });
  const w = model.describeWorld?.(e.node.world);
  return {
    event: displayed(e.event),
    state: `${parts.join(", ")}${w ? `; ${w}` : ""}`,
    emitted: e.emitted.map((x) => `${x.actor}.${x.event.type}`),
  };
}

/** A step as the report prints it: `S1 <- CLAIMED`, `C2 <- timer willDelay`, or the world event's name. */
function displayed(e: SystemEvent | undefined): EventObject {
  if (!e) return { type: "(start)" };
  if (e.kind === "world") return { type: e.name };
  if (e.kind === "timer") return { type: `${e.actor} <- timer ${e.event.type.split(".")[2] ?? e.event.type}` };
  const { type, ...payload } = e.event as EventObject & Record<string, unknown>;
  return { ...payload, type: `${e.to} <- ${type}` };
}
