import cluster, { type Worker } from "node:cluster";
import { Deferred, Effect, type Scope } from "effect";
import type { Logger } from "../log.js";

/**
 * The primary of `run --workers N` (docs/decisions/workers.md): keeps N worker processes,
 * each a whole gateway, and nothing else. A worker that dies on its own (a crash, a
 * signal, any exit but 0) is forked again after a backoff, 250 ms doubling to 10 s, reset
 * once the new one serves; one that exits 0 was stopped on purpose (the admin `ldm` op)
 * and stays stopped, as a lone gateway would. A worker that cannot start before every
 * worker has served once is a start failure: the pool stops and answers its exit code.
 */
export interface WorkerPoolOptions {
  readonly count: number;
  /** The id each worker logs as and the environment it starts with. */
  readonly worker: (index: number) => { readonly id: string; readonly env: Record<string, string> };
  readonly log: Logger;
  /** Every message a worker sends, with the descriptor it passed if any; "serving" is also read here (the pool's readiness). */
  readonly onMessage: (index: number, message: unknown, handle?: unknown) => void;
}

export interface WorkerPool {
  /** Resolves once every worker has served, or fails with the exit code of one that could not start. */
  readonly ready: Effect.Effect<void, number>;
  /** Resolves with the exit code once no worker is left: 0, or the first failure's. */
  readonly done: Effect.Effect<number>;
  /** The live workers, by slot. */
  live(): ReadonlyMap<number, Worker>;
  /** Whether the worker in this slot serves now: it said so since it was last forked. */
  serving(index: number): boolean;
  /** Passes a signal to every live worker; STOP signals also end the restarts. */
  signal(signal: NodeJS.Signals, stop: boolean): void;
}

const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 10_000;

export const workerPool = (options: WorkerPoolOptions): Effect.Effect<WorkerPool, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { log } = options;
    const workers = new Map<number, Worker>();
    const servedOnce = new Set<number>();
    const servingNow = new Set<number>();
    const ready = yield* Deferred.make<void, number>();
    // Done once the pool is told to stop: from then on no worker is forked again.
    const stopping = yield* Deferred.make<void>();
    const stopped = () => Deferred.isDoneUnsafe(stopping);
    const signal = (sig: NodeJS.Signals, ending: boolean) => {
      if (ending) Deferred.doneUnsafe(stopping, Effect.void);
      for (const w of workers.values()) w.process.kill(sig);
    };

    // One exit of one worker, as the process says it ended.
    const run = (index: number) =>
      Effect.callback<{ code: number | null; signal: string | null; servedAt: number | undefined }>((resume) => {
        const { id, env } = options.worker(index);
        const worker = cluster.fork(env);
        workers.set(index, worker);
        let servedAt: number | undefined;
        worker.on("message", (message: unknown, handle?: unknown) => {
          options.onMessage(index, message, handle);
          if ((message as { mqgw?: string } | null)?.mqgw === "serving") {
            servedAt ??= Date.now();
            servedOnce.add(index);
            servingNow.add(index);
            if (servedOnce.size === options.count) Deferred.doneUnsafe(ready, Effect.void);
          }
        });
        log.info({ worker: id, pid: worker.process.pid }, "worker started");
        worker.once("exit", (code, sig) => {
          workers.delete(index);
          servingNow.delete(index);
          resume(Effect.succeed({ code, signal: sig, servedAt }));
        });
      });

    const slot = (index: number): Effect.Effect<number> =>
      Effect.gen(function* () {
        const { id } = options.worker(index);
        let failures = 0;
        for (;;) {
          const exit = yield* run(index);
          if (stopped() || (exit.code === 0 && exit.signal === null)) {
            log.info({ worker: id, exit_code: exit.code, signal: exit.signal }, "worker stopped");
            return exit.code ?? 0;
          }
          if (!servedOnce.has(index)) {
            // It never served: its own stderr said why (a port in use...). Retrying would only repeat it.
            const code = exit.code ?? 2;
            log.error(
              { worker: id, exit_code: exit.code, signal: exit.signal },
              "worker could not start; stopping the others",
            );
            Deferred.doneUnsafe(ready, Effect.fail(code));
            signal("SIGTERM", true);
            return code;
          }
          failures = exit.servedAt !== undefined ? 1 : failures + 1;
          const restartInMs = Math.min(FIRST_DELAY_MS * 2 ** (failures - 1), MAX_DELAY_MS);
          log.warn({ worker: id, exit_code: exit.code, signal: exit.signal, restartInMs }, "worker exited; restarting");
          yield* Effect.raceFirst(Effect.sleep(restartInMs), Deferred.await(stopping));
          if (stopped()) return 0;
        }
      });

    const slots = Array.from({ length: options.count }, (_, i) => i + 1);
    const done = yield* Deferred.make<number>();
    yield* Effect.forEach(slots, slot, { concurrency: "unbounded" }).pipe(
      Effect.flatMap((codes) => Deferred.succeed(done, codes.find((c) => c !== 0) ?? 0)),
      Effect.forkScoped,
    );
    // Closing the scope early (the primary failed) leaves no worker behind.
    yield* Effect.addFinalizer(() => Effect.sync(() => signal("SIGTERM", true)));
    return {
      ready: Deferred.await(ready),
      done: Deferred.await(done),
      live: () => workers,
      serving: (index) => servingNow.has(index),
      signal,
    };
  });
