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
 * For each recorded transition, the arrows that drew it (indexes into `edges`; none when no
 * arrow fits). An actor's record keeps where it settled, not each step between: a step that
 * went on through `always` arrows is one record, drawn as its event's arrow and the `always`
 * arrows after it (as its start is the initial arrow and those after it). Failing that, the
 * arrow between the two states that names the event, else any, the innermost first.
 */
export function edgesTaken(edges: readonly EdgeRef[], recent: readonly TransitionView[]): number[][] {
  return recent.map((t) => {
    if (t.to === "") return [];
    const first = (e: EdgeRef) =>
      t.from === "" ? e.from === "*" : !e.from.startsWith("*") && within(t.from, e.from) && e.events.includes(t.event);
    const chain = hops(edges, first, t.to);
    if (chain || t.from === "") return chain ?? [];
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
    return best >= 0 ? [best] : [];
  });
}

/** Arrows one recorded step is drawn with at most: its first and up to three `always` ones after it. */
const MAX_HOPS = 4;

/** The shortest run of arrows from one that `first` accepts, on through `always` arrows, into `to`. */
function hops(edges: readonly EdgeRef[], first: (e: EdgeRef) => boolean, to: string): number[] | undefined {
  let runs: number[][] = [];
  edges.forEach((e, i) => {
    if (first(e)) runs.push([i]);
  });
  for (let hop = 0; hop < MAX_HOPS && runs.length > 0; hop++) {
    const done = runs.find((run) => within(to, edges[run.at(-1)!]!.to));
    if (done) return done;
    runs = runs.flatMap((run) => {
      const at = edges[run.at(-1)!]!.to;
      return edges.flatMap((e, i) =>
        e.events.includes("always") && !run.includes(i) && (within(at, e.from) || within(e.from, at))
          ? [[...run, i]]
          : [],
      );
    });
  }
  return undefined;
}
