import { JetStreamApiError, type JetStreamManager } from "@nats-io/jetstream";
import type { ServerInfo } from "@nats-io/transport-node";
import type { Logger } from "../log.js";

/**
 * Replicas of the streams and buckets the gateway makes (docs/decisions/mqtt-store.md,
 * "Replicas"): `mqtt.stream_replicas` when set, else the cluster's size up to 3, as
 * nats-server's own MQTT does with `stream_replicas`. The size is what the server's INFO
 * tells (`connect_urls` lists every cluster member's client URL); when it cannot tell
 * (no_advertise), 3 is tried and the count steps down while the server answers that it
 * has fewer peers.
 */
export const REPLICAS_KEY = "mqtt.stream_replicas";

/** JetStream's "not that many peers here": 10074 not clustered, 10005 no suitable peers, 10023 insufficient resources. */
const NOT_CLUSTERED = 10074;
const FEWER_PEERS = new Set([NOT_CLUSTERED, 10005, 10023]);

/** `info`: what the server the gateway's connection is on says of itself (its INFO). */
export function wantedReplicas(info: ServerInfo | undefined, configured: number | null): number {
  if (configured !== null) return configured;
  if (!info?.cluster) return 1;
  return Math.min(3, info.connect_urls?.length || 3);
}

function apiCode(e: unknown): number | undefined {
  return e instanceof JetStreamApiError ? e.code : undefined;
}

/**
 * Runs `create` with the wanted replica count. A count the operator set is used as is
 * (the server's refusal is the answer); the default steps down to what the cluster can
 * place, and says so.
 */
export async function createWithReplicas<T>(
  what: { readonly kind: string; readonly name: string; readonly account: string },
  info: ServerInfo | undefined,
  configured: number | null,
  log: Logger,
  create: (replicas: number) => Promise<T>,
): Promise<T> {
  const wanted = wantedReplicas(info, configured);
  for (let replicas = wanted; ; replicas--) {
    try {
      const made = await create(replicas);
      if (replicas < wanted) {
        log.warn(
          { account: what.account, stream: what.name, replicas, wanted, key: REPLICAS_KEY },
          `created the ${what.kind} with fewer replicas than wanted: the cluster could not place more`,
        );
      }
      return made;
    } catch (e) {
      const code = apiCode(e);
      if (configured !== null || replicas <= 1 || code === undefined || !FEWER_PEERS.has(code)) throw e;
      if (code === NOT_CLUSTERED) replicas = 2; // straight to 1
    }
  }
}

/**
 * Logs each existing stream of `streams` that has fewer replicas than wanted (at start:
 * an operator who set `mqtt.stream_replicas`, or moved to a cluster, learns which of the
 * gateway's streams to scale with `nats stream edit --replicas`). Absent streams are made
 * on first use with the wanted count; an account without JetStream is skipped.
 */
export async function reportReplicas(
  account: string,
  jsm: JetStreamManager,
  info: ServerInfo | undefined,
  configured: number | null,
  streams: readonly string[],
  log: Logger,
): Promise<void> {
  const wanted = wantedReplicas(info, configured);
  for (const stream of streams) {
    let replicas: number;
    try {
      replicas = (await jsm.streams.info(stream)).config.num_replicas;
    } catch {
      continue;
    }
    if (replicas < wanted) {
      log.warn(
        { account, stream, replicas, wanted, key: REPLICAS_KEY },
        `stream ${stream} has ${replicas} replica(s), fewer than ${wanted}: raise it with nats stream edit ${stream} --replicas ${wanted}, or set ${REPLICAS_KEY}`,
      );
    }
  }
}
