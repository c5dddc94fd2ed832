// `mq-gateway run --workers N` (docs/decisions/workers.md): this process serves no client.
// It starts the embedded nats-server once (when no nats.servers is configured), listens on
// the HTTP port for all, forks N workers (each a whole gateway, id `<id>-<k>`, sharing the
// client ports) and passes signals on; it stops when every worker has.
import cluster from "node:cluster";
import { Effect, Exit, type Scope } from "effect";
import { serveHttp } from "../actors/http.js";
import { ActorRegistry } from "../actors/registry.js";
import { Supervisor } from "../actors/supervisor.js";
import { workerPool } from "../actors/workerPool.js";
import type { GatewayConfig } from "../config/schema.js";
import { createLogger, type Logger } from "../log.js";
import { machines } from "../machines/index.js";
import { startEmbedded } from "./embeddedStart.js";
import { type RelayTargets, relayHandoff } from "./handoffRelay.js";
import { runToExit } from "./runToExit.js";
import { listenFailure } from "./startupErrors.js";
import { type WorkerMessage, workerEnv, workerId } from "./workerChannel.js";
import { WorkerQuestions, workersRoutes } from "./workersHttp.js";
import { workersStatechartsRoutes } from "./workersStatecharts.js";

export function runPrimary(config: GatewayConfig, count: number): Promise<number> {
  const log = createLogger(config.log);
  return runToExit(config, log, { workers: count }, primary(config, count, log));
}

const primary = (config: GatewayConfig, count: number, log: Logger): Effect.Effect<number, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    // The kernel hands each accept to one of the workers' shared sockets; round-robin would
    // make this process accept every connection and pass it on (NODE_CLUSTER_SCHED_POLICY=rr still can).
    if (process.env.NODE_CLUSTER_SCHED_POLICY === undefined) cluster.schedulingPolicy = cluster.SCHED_NONE;
    const ids = Array.from({ length: count }, (_, i) => workerId(config.id, i + 1));
    // The primary's own actors (its embedded nats-server, the /statecharts viewers), counted on that page.
    const registry = new ActorRegistry();
    const supervisor = yield* Supervisor.make(log);
    let natsUrl: string | null = null;
    if (config.nats.servers.length === 0) {
      const onRestart = () => log.warn("the workers reconnect to the restarted embedded nats-server");
      natsUrl = (yield* startEmbedded(config, { log, registry, onRestart }, ids)).url;
    }

    let pool: RelayTargets | undefined;
    const questions = new WorkerQuestions(() => pool?.live() ?? new Map());
    const workerListeners = new Map<number, Record<string, string>>();
    const listeners: Record<string, string> = {};
    let servingSince: Date | undefined;
    if (config.http.listen) {
      const at = config.http.listen;
      const routes = {
        ...workersRoutes({
          id: config.id,
          questions,
          started: () => servingSince !== undefined,
          listeners: () => listeners,
        }),
        ...workersStatechartsRoutes({ machines, questions, registry, supervisor }),
      };
      const port = yield* serveHttp(at, routes).pipe(Effect.mapError((e) => listenFailure("http", at, e)));
      listeners.http = `${at.host}:${port}`;
    }

    const workers = yield* workerPool({
      count,
      worker: (index) => ({
        id: ids[index - 1]!,
        env: workerEnv({ index, primaryId: config.id, natsUrl, count }),
      }),
      log,
      onMessage: (index, message, handle) => {
        const m = message as WorkerMessage;
        if (m?.mqgw === "handoff") return relayHandoff(m, handle, pool);
        if (m?.mqgw === "serving") workerListeners.set(index, m.listeners);
        questions.onMessage(message);
      },
    });
    pool = workers;

    const signals: Array<[NodeJS.Signals, () => void]> = [
      ["SIGTERM", () => workers.signal("SIGTERM", true)],
      ["SIGINT", () => workers.signal("SIGTERM", true)],
      ["SIGUSR2", () => workers.signal("SIGUSR2", true)],
      ["SIGHUP", () => workers.signal("SIGHUP", false)],
    ];
    for (const [sig, fn] of signals) process.on(sig, fn);
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        for (const [sig, fn] of signals) process.off(sig, fn);
      }),
    );

    const ready = yield* Effect.exit(workers.ready);
    if (Exit.isSuccess(ready)) {
      servingSince = new Date();
      // The workers share every client port, so any worker's listeners are the gateway's.
      Object.assign(listeners, { ...workerListeners.get(1), ...listeners });
      log.info({ id: config.id, workers: ids, listeners }, "mq-gateway serving");
    }
    // A worker that could not start said why on stderr; the pool has stopped the others.
    return yield* workers.done;
  });
