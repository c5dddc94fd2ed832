// What the live page reads off counts and recorded transitions: which states are lit, and
// which arrows of a chart a client's recent transitions took. Plain functions, shared by
// the browser script and the tests.

/** Actors per configuration (`a.b | a.c`, one path per parallel region), per machine. */
export type Counts = Record<string, Record<string, number>>;

/** A transition as the page receives it. */
export interface TransitionView {
  readonly machine: string;
  readonly actor: string;
  readonly at: number;
  readonly event: string;
  readonly from: string;
  readonly to: string;
}

/** One arrow of a drawing, as svg.ts marks it. */
export interface EdgeRef {
  readonly from: string;
  readonly to: string;
  readonly events: readonly string[];
}

/** Whether a configuration is in a state or below it; "" (the "any state" box) holds every one. */
export const within = (config: string, path: string): boolean =>
  path === "" || config.split(" | ").some((p) => p === path || p.startsWith(`${path}.`));

/** Actors in a state or any state below it (a parent counts its children, each actor once). */
export function countIn(counts: Counts, machine: string, path: string): number {
  let n = 0;
  for (const [config, k] of Object.entries(counts[machine] ?? {})) if (within(config, path)) n += k;
  return n;
}

/** The leaf states of a configuration. */
export const leaves = (config: string): string[] => (config === "" ? [] : config.split(" | "));

/**
 * For each recorded transition, the arrow that drew it (an index into `edges`), or -1. An
 * actor's record keeps where it settled, not each step between (an `always` hop is folded
 * into the event that started it): an arrow with the event is preferred, then any arrow
 * between the two states, the innermost first.
 */
export function edgesTaken(edges: readonly EdgeRef[], recent: readonly TransitionView[]): number[] {
  return recent.map((t) => {
    if (t.to === "") return -1;
    if (t.from === "") return edges.findIndex((e) => e.from === "*" && within(t.to, e.to));
    let best = -1;
    let bestScore = -1;
    edges.forEach((e, i) => {
      if (e.from.startsWith("*") || !within(t.from, e.from) || !within(t.to, e.to)) return;
      const score = (e.events.includes(t.event) ? 1000 : 0) + e.from.length;
      if (score > bestScore) {
        best = i;
        bestScore = score;
      }
    });
    return best;
  });
}
