import type { EventObject, TransitionSnapshot } from "xstate";
import { type AdjacencyMap, getAdjacencyMap, getShortestPaths } from "xstate/graph";
import type { Model } from "./model.js";
import { eventsIn, isTimer, type Node, productLogic } from "./product.js";

/** One step of a counter-example: the event and where it led. */
export interface PathStep {
  readonly event: EventObject;
  readonly state: string;
  readonly emitted: readonly string[];
}

export interface Finding {
  readonly kind: "invariant" | "progress" | "bound";
  readonly property: string;
  readonly message: string;
  /** The shortest path from the start to the state that shows it. */
  readonly path: readonly PathStep[];
}

export interface Report {
  readonly machine: string;
  readonly bound: string;
  readonly states: number;
  /** Steps that change the explored state (an event the machine ignores is not one). */
  readonly transitions: number;
  readonly properties: readonly string[];
  readonly findings: readonly Finding[];
}

/** Past this many visits the exploration stops and says the abstraction is too fine. */
export const MAX_VISITS = 2_000_000;

/**
 * Explores every state of the model's machine reachable with its abstract events and
 * timers (breadth first, with xstate's graph utilities), checks each invariant on every
 * step and each progress property on the whole graph, and reports each broken property
 * with a shortest counter-example.
 */
export function check(model: Model, options: { maxVisits?: number } = {}): Report {
  const logic = productLogic(model);
  const traversal = {
    events: (s: { context: Node }) => eventsIn(model, s.context),
    serializeState: (s: { context: Node }) => s.context.key,
  };
  const properties = [...model.invariants.map((i) => i.name), ...model.progress.map((p) => p.name)];
  const base = { machine: model.name ?? model.machine.id, bound: model.bound, properties };

  let adjacency: AdjacencyMap<TransitionSnapshot<Node>, EventObject>;
  try {
    adjacency = getAdjacencyMap(logic, { ...traversal, limit: options.maxVisits ?? MAX_VISITS });
  } catch (e) {
    const message = `${(e as Error).message}: more than ${options.maxVisits ?? MAX_VISITS} visits; abstract the context further`;
    return {
      ...base,
      states: 0,
      transitions: 0,
      findings: [{ kind: "bound", property: "bounded state space", message, path: [] }],
    };
  }

  const nodes = new Map<string, Node>();
  const edges: Array<{ from: string; to: Node; event: EventObject }> = [];
  for (const [key, value] of Object.entries(adjacency)) {
    nodes.set(key, value.state.context);
    const out = Object.values(value.transitions) as Array<{ event: EventObject; state: TransitionSnapshot<Node> }>;
    for (const t of out) edges.push({ from: key, to: t.state.context, event: t.event });
  }
  const transitions = edges.filter((e) => e.to.key !== e.from).length;

  const shortestTo = (wanted: (node: Node) => boolean): Node[] => {
    const paths = getShortestPaths(logic, { ...traversal, toState: (s) => wanted(s.context) });
    const best = paths.sort((a, b) => a.weight - b.weight)[0];
    return best
      ? run(
          model,
          best.steps.slice(1).map((s) => s.event),
        )
      : [];
  };

  const findings: Finding[] = [];
  const broken = new Set<string>();
  for (const node of nodes.values()) if (node.broken) broken.add(node.broken.invariant);
  for (const invariant of broken) {
    const path = shortestTo((n) => n.broken?.invariant === invariant);
    const message = path.at(-1)?.broken?.message ?? "";
    findings.push({ kind: "invariant", property: invariant, message, path: path.map(describe) });
  }

  const initial = nodes.values().next().value as Node;
  for (const p of model.progress) {
    const stuck = stuckStates(p, initial, nodes, edges);
    if (stuck.size === 0) continue;
    const path = shortestTo((n) => stuck.has(n.key)).map(describe);
    const state = path.at(-1)?.state ?? "(start)";
    const via = p.using ? "the events it may rely on and its timers" : "its timers alone";
    findings.push({
      kind: "progress",
      property: p.name,
      message: `stuck in ${state}: nothing reachable from there through ${via} satisfies it`,
      path,
    });
  }
  return { ...base, states: nodes.size, transitions, findings };
}

/** The states from which a progress property can no longer be met. */
function stuckStates(
  p: Model["progress"][number],
  initial: Node,
  nodes: ReadonlyMap<string, Node>,
  edges: ReadonlyArray<{ from: string; to: Node; event: EventObject }>,
): Set<string> {
  const reach = p.reach ?? ((s) => s.status === "done");
  const allowed = (e: EventObject) => isTimer(e) || (p.using?.(e) ?? false);
  const forward = new Map<string, string[]>();
  const backward = new Map<string, string[]>();
  const starts = new Set<string>(initial.triggered.includes(p.name) ? [initial.key] : []);
  for (const e of edges) {
    if (e.to.triggered.includes(p.name)) starts.add(e.to.key);
    if (e.to.key === e.from) continue;
    (forward.get(e.from) ?? forward.set(e.from, []).get(e.from)!).push(e.to.key);
    if (allowed(e.event)) (backward.get(e.to.key) ?? backward.set(e.to.key, []).get(e.to.key)!).push(e.from);
  }
  const closure = walk([...starts], forward);
  // A broken node is not explored further: its invariant is reported already, and what
  // lies past it is unknown, so it counts as a way out rather than as a dead end.
  const goals = [...nodes.values()].filter((n) => n.broken || reach(n.snapshot)).map((n) => n.key);
  const good = walk(goals, backward);
  const stuck = new Set<string>();
  for (const key of closure) if (!good.has(key)) stuck.add(key);
  return stuck;
}

function walk(from: readonly string[], next: ReadonlyMap<string, readonly string[]>): Set<string> {
  const seen = new Set(from);
  const queue = [...from];
  for (let k = queue.shift(); k !== undefined; k = queue.shift()) {
    for (const n of next.get(k) ?? []) {
      if (!seen.has(n)) {
        seen.add(n);
        queue.push(n);
      }
    }
  }
  return seen;
}

/** The nodes along a path, from the start: each knows the event that led to it and what it emitted. */
function run(model: Model, events: readonly EventObject[]): Node[] {
  const logic = productLogic(model);
  const scope = undefined as never;
  let snap = logic.getInitialSnapshot(scope, model.input as never);
  const out = [snap.context];
  for (const event of events) {
    snap = logic.transition(snap, event, scope);
    out.push(snap.context);
  }
  return out;
}

function describe(node: Node): PathStep {
  const value = stateLabel(node.snapshot.value);
  const state = node.snapshot.status === "active" ? value : `${value} (${node.snapshot.status})`;
  return { event: node.event, state, emitted: node.emitted.map((e) => e.type) };
}

export function stateLabel(value: unknown): string {
  if (typeof value === "string") return value;
  if (value && typeof value === "object") {
    const parts = Object.entries(value).map(([k, v]) => {
      const inner = stateLabel(v);
      return inner ? `${k}.${inner}` : k;
    });
    return parts.length === 1 ? parts[0]! : `{${parts.join(", ")}}`;
  }
  return "";
}
