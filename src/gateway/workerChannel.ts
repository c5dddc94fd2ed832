// A worker's side of `run --workers` (docs/decisions/workers.md): who it is (set by the
// primary in its environment), telling the primary it serves, and answering the
// primary's questions for the HTTP port, which only the primary listens on.
import cluster from "node:cluster";
import type { GatewayViews, Health } from "./views.js";
import type { WorkerCharts } from "./workerCharts.js";

export interface WorkerRole {
  /** 1..N, the worker's slot; the same slot keeps its number across restarts. */
  readonly index: number;
  /** The primary's gateway id; this worker's is `<primary id>-<index>`. */
  readonly primaryId: string;
  /** The primary's embedded nats-server, when it runs one. */
  readonly natsUrl: string | null;
  /** How many workers the group has (N of `--workers N`): a session's home is one of them. */
  readonly count: number;
}

/** The environment the primary gives worker `index` (read back by workerRole). */
export function workerEnv(role: WorkerRole): Record<string, string> {
  return {
    MQGW_WORKER: String(role.index),
    MQGW_WORKER_OF: role.primaryId,
    MQGW_WORKER_NATS: role.natsUrl ?? "",
    MQGW_WORKERS: String(role.count),
  };
}

/** This process's role when the primary of `run --workers` forked it; undefined otherwise. */
export function workerRole(env: NodeJS.ProcessEnv = process.env): WorkerRole | undefined {
  if (!cluster.isWorker) return undefined;
  const index = Number(env.MQGW_WORKER);
  const count = Number(env.MQGW_WORKERS);
  const primaryId = env.MQGW_WORKER_OF;
  if (!Number.isSafeInteger(index) || index < 1 || !primaryId) return undefined;
  return {
    index,
    primaryId,
    natsUrl: env.MQGW_WORKER_NATS || null,
    count: Number.isSafeInteger(count) && count >= index ? count : index,
  };
}

export const workerId = (primaryId: string, index: number): string => `${primaryId}-${index}`;

/** A question of the primary, and its answer; `seq` pairs them. */
export type Question =
  | { readonly mqgw: "ask"; readonly seq: number; readonly what: "health" }
  | { readonly mqgw: "ask"; readonly seq: number; readonly what: "metrics" }
  | {
      readonly mqgw: "ask";
      readonly seq: number;
      readonly what: "clients";
      readonly query: Parameters<GatewayViews["clients"]>[0];
    }
  | { readonly mqgw: "ask"; readonly seq: number; readonly what: "charts" }
  | { readonly mqgw: "ask"; readonly seq: number; readonly what: "actor"; readonly q: string }
  | {
      readonly mqgw: "ask";
      readonly seq: number;
      readonly what: "inState";
      readonly machine: string;
      readonly state: string;
    };

/**
 * An MQTT socket moving to its session's home worker, sent with the socket's descriptor
 * (docs/decisions/session-homes.md): from the worker that read its CONNECT to the primary,
 * which passes it on to `to`. `bytes` (base64): everything read of it so far, its CONNECT
 * first. `stay`: serve it, do not move it again (its home could not take it).
 */
export interface SocketHandoff {
  readonly mqgw: "handoff";
  readonly to: number;
  readonly from: number;
  readonly bytes: string;
  readonly stay?: true;
}

export type WorkerMessage =
  | { readonly mqgw: "serving"; readonly listeners: Record<string, string> }
  | { readonly mqgw: "answer"; readonly seq: number; readonly value: unknown }
  | SocketHandoff;

export type HealthAnswer = Health;

function send(message: WorkerMessage): void {
  // The channel closes when the primary goes; then there is nobody to tell.
  if (process.connected) process.send?.(message);
}

export function tellPrimaryServing(listeners: Record<string, string>): void {
  send({ mqgw: "serving", listeners: { ...listeners } });
}

/** Answers the primary until closed. */
export function answerPrimary(views: GatewayViews, charts: WorkerCharts): { close(): void } {
  const onMessage = (message: unknown) => {
    const q = message as Question;
    if (q?.mqgw !== "ask") return;
    const answer = async (): Promise<unknown> => {
      switch (q.what) {
        case "health":
          return views.health();
        case "metrics":
          return views.metrics.registry.getMetricsAsJSON();
        case "clients":
          return views.clients(q.query);
        case "charts":
          return charts.charts();
        case "actor":
          return charts.actor(q.q);
        case "inState":
          return charts.inState(q.machine, q.state);
      }
    };
    void answer().then(
      (value) => send({ mqgw: "answer", seq: q.seq, value }),
      (e: Error) => send({ mqgw: "answer", seq: q.seq, value: { error: e.message } }),
    );
  };
  process.on("message", onMessage);
  return {
    close: () => {
      process.off("message", onMessage);
      charts.close();
    },
  };
}

/**
 * Lets a worker whose gateway has stopped exit with its own code: the channel to the
 * primary holds the process open, and cluster's disconnect (unlike process.disconnect,
 * which cluster answers with exit 0) says the worker meant to go.
 */
export function leaveCluster(): void {
  if (cluster.worker?.isConnected()) cluster.worker.disconnect();
}
