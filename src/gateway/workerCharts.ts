// A worker's part of the primary's /statecharts under `run --workers`
// (docs/decisions/workers.md): its counts, the transitions since the primary last asked,
// one actor, the actors in a state. The primary asks over the IPC channel, as for /clients.
import type { ClientRegistry } from "../actors/clients.js";
import type { ActorRegistry } from "../actors/registry.js";
import { actorsInState, describeActor } from "../actors/statechartsPage.js";
import { transitionView } from "../actors/statechartsViewer.js";
import type { TransitionView } from "../statecharts/paths.js";

/** Transitions kept between two questions at most; the rest are counted as skipped. */
const MAX_KEPT = 500;
/** No question for this long: nobody watches the page, so the worker stops keeping transitions. */
const IDLE_MS = 10_000;

export interface ChartsAnswer {
  readonly id: string;
  readonly configurations: Record<string, Record<string, number>>;
  readonly entered: Record<string, Record<string, number>>;
  /** Actor ids as `<this gateway's id>/<actor id>`: the workers' ids overlap. */
  readonly transitions: TransitionView[];
  readonly skipped: number;
}

export class WorkerCharts {
  private kept: TransitionView[] = [];
  private skipped = 0;
  private unlisten: (() => void) | undefined;
  private idle: NodeJS.Timeout | undefined;

  constructor(
    private readonly id: string,
    private readonly registry: ActorRegistry,
    private readonly clients: ClientRegistry,
  ) {}

  /** Counts now and the transitions since the last call; keeps listening while the primary keeps asking. */
  charts(): ChartsAnswer {
    this.unlisten ??= this.registry.onTransition((t) => {
      if (this.kept.length < MAX_KEPT) this.kept.push({ ...transitionView(t), actor: `${this.id}/${t.actor.id}` });
      else this.skipped++;
    });
    if (this.idle) clearTimeout(this.idle);
    this.idle = setTimeout(() => this.close(), IDLE_MS);
    this.idle.unref();
    const answer = {
      id: this.id,
      configurations: this.registry.configurations(),
      entered: this.registry.entered(),
      transitions: this.kept,
      skipped: this.skipped,
    };
    this.kept = [];
    this.skipped = 0;
    return answer;
  }

  /** One actor by client id, cid or actor id; `<this gateway's id>/<actor id>` too (the page names worker actors so). */
  actor(q: string): Record<string, unknown> {
    const local = q.startsWith(`${this.id}/`) ? q.slice(this.id.length + 1) : q;
    return { ...describeActor(local, this.clients, this.registry), gateway: this.id };
  }

  inState(machine: string, state: string): ReturnType<typeof actorsInState> {
    const found = actorsInState(new URLSearchParams({ machine, state }), this.clients, this.registry);
    return "error" in found
      ? found
      : { total: found.total, actors: found.actors.map((a) => ({ ...a, gateway: this.id })) };
  }

  close(): void {
    this.unlisten?.();
    this.unlisten = undefined;
    if (this.idle) clearTimeout(this.idle);
    this.kept = [];
  }
}
