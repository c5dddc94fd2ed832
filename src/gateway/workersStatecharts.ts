// /statecharts on the primary of `run --workers` (docs/decisions/workers.md): the same page
// as a lone gateway's, with every worker's machines counted together. While a browser
// follows it the primary asks the workers for their counts and transitions four times a
// second; the primary's own actors (its embedded nats-server, the viewers) count too.
import type { AnyStateMachine } from "xstate";
import { type Handler, sendJson } from "../actors/http.js";
import type { ActorRegistry } from "../actors/registry.js";
import { eventsRoute, statechartsPageRoutes } from "../actors/statechartsPage.js";
import { type ChartFeed, registryFeed } from "../actors/statechartsViewer.js";
import type { Supervisor } from "../actors/supervisor.js";
import type { TransitionView } from "../statecharts/paths.js";
import type { ChartsAnswer } from "./workerCharts.js";
import type { WorkerQuestions } from "./workersHttp.js";

const POLL_MS = 250;
type Counts = Record<string, Record<string, number>>;

/** Every worker's counts and transitions, and the primary's own, as one feed. */
export class WorkersFeed implements ChartFeed {
  private readonly listeners = new Set<(t: TransitionView) => void>();
  private latest: ChartsAnswer[] = [];
  private loop: Promise<void> | undefined;
  private readonly own: ChartFeed;

  constructor(
    private readonly questions: WorkerQuestions,
    registry: ActorRegistry,
  ) {
    this.own = registryFeed(registry);
  }

  onTransition(listener: (t: TransitionView) => void): () => void {
    this.listeners.add(listener);
    const unlisten = this.own.onTransition(listener);
    this.loop ??= this.follow();
    return () => {
      unlisten();
      this.listeners.delete(listener);
    };
  }

  configurations(): Counts {
    return sum([this.own.configurations(), ...this.latest.map((a) => a.configurations)]);
  }

  entered(): Counts {
    return sum([this.own.entered(), ...this.latest.map((a) => a.entered)]);
  }

  /** Asks the workers while anyone listens; one loop at a time, however viewers come and go. */
  private async follow(): Promise<void> {
    while (this.listeners.size > 0) {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      if (this.listeners.size === 0) break;
      const answers = await this.questions.askAll({ what: "charts" });
      this.latest = answers.flatMap(({ value }) => (isCharts(value) ? [value] : []));
      for (const a of this.latest) for (const t of a.transitions) for (const l of this.listeners) l(t);
    }
    this.loop = undefined;
  }
}

const isCharts = (v: unknown): v is ChartsAnswer => typeof v === "object" && v !== null && "configurations" in v;

function sum(all: readonly Counts[]): Counts {
  const out: Counts = {};
  for (const counts of all)
    for (const [machine, byState] of Object.entries(counts)) {
      const into = out[machine] ?? {};
      out[machine] = into;
      for (const [state, n] of Object.entries(byState)) into[state] = (into[state] ?? 0) + n;
    }
  return out;
}

/** The page, its stream, one actor (from whichever worker has it) and who is in a state (on every worker). */
export function workersStatechartsRoutes(deps: {
  readonly machines: readonly AnyStateMachine[];
  readonly questions: WorkerQuestions;
  readonly registry: ActorRegistry;
  readonly supervisor: Supervisor;
}): Record<string, Handler> {
  const feed = new WorkersFeed(deps.questions, deps.registry);
  return {
    ...statechartsPageRoutes(deps.machines),
    "/statecharts/events": eventsRoute({ feed, registry: deps.registry, supervisor: deps.supervisor }),
    "/statecharts/actor": async (req, res) => {
      const q = new URL(req.url ?? "/", "http://localhost").searchParams.get("q")?.trim() ?? "";
      if (!q) return sendJson(res, 404, { error: "ask for a client id, a cid or an actor id" });
      const answers = (await deps.questions.askAll({ what: "actor", q })).map(
        (a) => a.value as Record<string, unknown> | undefined,
      );
      const found = answers.find((a) => a && !("error" in a));
      sendJson(res, found ? 200 : 404, found ?? { error: `no actor, cid or client id ${q} on any worker` });
    },
    "/statecharts/state": async (req, res) => {
      const query = new URL(req.url ?? "/", "http://localhost").searchParams;
      const machine = query.get("machine") ?? "";
      const state = query.get("state") ?? "";
      if (!machine || !state) return sendJson(res, 400, { error: "ask for ?machine=<machine id>&state=<state path>" });
      const answers = await deps.questions.askAll({ what: "inState", machine, state });
      let total = 0;
      const actors: Array<Record<string, unknown>> = [];
      for (const { value } of answers) {
        const page = value as { total?: number; actors?: Array<Record<string, unknown>>; gateway?: string } | undefined;
        if (!page?.actors) continue;
        total += page.total ?? 0;
        actors.push(...page.actors);
      }
      sendJson(res, 200, { total, actors });
    },
  };
}
