import type { ServerResponse } from "node:http";
import { Effect, type Scope } from "effect";
import { statechartsViewerMachine } from "../machines/statechartsViewer.js";
import type { TransitionView } from "../statecharts/paths.js";
import type { MachineActor } from "./machineActor.js";
import { awaitDone, startMachine } from "./machineActor.js";
import type { ActorRegistry, ActorTransition } from "./registry.js";

/** Changes within this window go out as one message: a burst of connects is one repaint. */
const FLUSH_MS = 100;
/** Transitions per message at most; the rest are counted as skipped (the counts stay exact). */
const MAX_BATCH = 200;

export interface ViewerSettings {
  readonly heartbeatMs: number;
  readonly stallMs: number;
}

export type { TransitionView };

/**
 * What a viewer follows: every transition from now on, and counts on demand. A gateway's
 * own registry (registryFeed), or under `--workers` every worker's (workersFeed.ts).
 */
export interface ChartFeed {
  onTransition(listener: (t: TransitionView) => void): () => void;
  configurations(): Record<string, Record<string, number>>;
  entered(): Record<string, Record<string, number>>;
}

export const registryFeed = (registry: ActorRegistry): ChartFeed => ({
  onTransition: (listener) => registry.onTransition((t) => listener(transitionView(t))),
  configurations: () => registry.configurations(),
  entered: () => registry.entered(),
});

export const transitionView = (t: ActorTransition): TransitionView => ({
  machine: t.machine,
  actor: t.actor.id,
  at: t.at,
  event: t.event,
  from: t.from,
  to: t.to,
});

type Machine = MachineActor<typeof statechartsViewerMachine>;

/** The edge of one viewer: its response stream, the batch of changes, the flush timer. */
class ViewerStream {
  private actor: Machine | undefined;
  private batch: TransitionView[] = [];
  private skipped = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly feed: ChartFeed,
  ) {}

  open(): void {
    this.res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      // Reverse proxies that buffer would hold the stream back.
      "x-accel-buffering": "no",
    });
    this.res.write("retry: 2000\n\n");
  }

  attach(actor: Machine): void {
    this.actor = actor;
    this.res.on("drain", () => actor.send({ type: "DRAINED" }));
    this.res.on("close", () => actor.send({ type: "CLOSED" }));
    // A write refused before the machine was handed over (its first sync) is still waiting for 'drain'.
    if (this.res.destroyed) actor.send({ type: "CLOSED" });
    else if (this.res.writableNeedDrain) actor.send({ type: "BLOCKED" });
  }

  onTransition(t: TransitionView): void {
    if (!this.streaming()) return;
    if (this.batch.length < MAX_BATCH) this.batch.push(t);
    else this.skipped++;
    this.timer ??= setTimeout(() => this.flush(), FLUSH_MS);
  }

  /** Every count in full, with whatever changes are waiting. */
  sync(): void {
    this.flush();
    this.send("counts", this.feed.configurations());
    this.send("entered", { at: Date.now(), entered: this.feed.entered() });
  }

  end(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.res.writableEnded) this.res.end();
  }

  private flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.streaming() || (this.batch.length === 0 && this.skipped === 0)) return;
    const transitions = this.batch;
    const skipped = this.skipped;
    this.batch = [];
    this.skipped = 0;
    this.send("transitions", { transitions, skipped });
    this.send("counts", this.feed.configurations());
    this.send("entered", { at: Date.now(), entered: this.feed.entered() });
  }

  private streaming(): boolean {
    return this.actor === undefined || this.actor.getSnapshot().matches("streaming");
  }

  private send(event: string, data: unknown): void {
    if (this.res.writableEnded || this.res.destroyed) return;
    if (this.res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)) return;
    this.actor?.send({ type: "BLOCKED" });
  }
}

/**
 * One browser on `GET /statecharts/events` as a supervised actor: the stream, the
 * registry listener and the timer are released with its scope, however it ends.
 */
export const statechartsViewerActor = (
  res: ServerResponse,
  feed: ChartFeed,
  registry: ActorRegistry,
  settings: ViewerSettings,
  id: string,
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const stream = new ViewerStream(res, feed);
    stream.open();
    const unlisten = feed.onTransition((t) => stream.onTransition(t));
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        unlisten();
        stream.end();
      }),
    );
    const actor = yield* startMachine(statechartsViewerMachine, {
      id,
      input: settings,
      registry,
      on: { sync: () => stream.sync(), end: () => stream.end() },
    });
    stream.attach(actor);
    yield* awaitDone(actor);
  });
