import { Effect, type Scope } from "effect";
import { formatDuration } from "../../config/units.js";
import type { Logger } from "../../log.js";
import { adminRebalanceMachine } from "../../machines/adminRebalance.js";
import type { NatsSeam } from "../client/natsSeam.js";
import type { ClientRegistry } from "../clients.js";
import { awaitDone, startMachine } from "../machineActor.js";
import type { ActorRegistry } from "../registry.js";
import type { Supervisor } from "../supervisor.js";
import type { RebalanceReply, RebalanceRequest } from "./rebalanceRequest.js";

/** How long one connection may take to reconnect at its new server before it counts as a miss. */
const MOVE_TIMEOUT_MS = 5_000;

/** `nats://host:port`, `tls://host:port` or `host:port` is a URL; anything else is a server name. */
export function targetOf(server: string): { kind: "url"; listen: string } | { kind: "name"; name: string } {
  const m = /^(?:(?:nats|tls):\/\/)?(?:[^@/\s]*@)?([^:/\s]+|\[[^\]]+\]):(\d{1,5})\/?$/.exec(server);
  return m ? { kind: "url", listen: `${m[1]}:${m[2]}` } : { kind: "name", name: server };
}

/**
 * The admin `rebalance` op: answers at once (`started`), then moves the connections as
 * an actor under the supervisor. One rebalance runs at a time on a gateway.
 */
export function rebalancer(deps: {
  readonly clients: ClientRegistry;
  readonly registry: ActorRegistry;
  readonly supervisor: Supervisor;
  readonly log: Logger;
}): (request: RebalanceRequest) => RebalanceReply {
  // One at a time: the running one is the supervisor's actor of this id.
  const id = "admin-rebalance";
  return (request) => {
    if (deps.supervisor.has(id)) return { started: false, reason: "a rebalance is already running on this gateway" };
    const target = targetOf(request.server);
    const on = (nats: NatsSeam) =>
      target.kind === "url" ? nats.listen() === target.listen : nats.serverName() === target.name;
    // Clients with equal credentials share one connection: moving it moves them all.
    const all = new Set<NatsSeam>();
    for (const h of deps.clients.all()) {
      const nats = h.account === request.account ? h.natsConnection?.() : undefined;
      if (nats && !nats.isClosed()) all.add(nats);
    }
    if (all.size === 0)
      return { started: false, reason: `no client of account ${request.account} is connected to this gateway` };
    const toMove = [...all].filter((nats) => !on(nats));
    if (toMove.length === 0)
      return {
        started: false,
        reason: `every NATS connection of account ${request.account} is on ${request.server} already`,
      };
    const queue = toMove.slice(0, request.max ?? toMove.length);
    const candidates = candidatesFor(target, queue[0]!, deps.clients);
    deps.supervisor.spawn(id, "adminRebalance", rebalanceActor(queue, candidates, target, request, deps));
    return { started: true, server: request.server, max: queue.length, over: formatDuration(request.overMs) };
  };
}

/**
 * Where the first connection tries. A URL is itself. For a name: the URL of a connection
 * of this gateway that is on that server now, if any, then every other entry of the
 * first connection's pool (configured servers plus those the cluster announced).
 */
function candidatesFor(target: ReturnType<typeof targetOf>, first: NatsSeam, clients: ClientRegistry): string[] {
  if (target.kind === "url") return [target.listen];
  const out = new Set<string>();
  for (const h of clients.all()) {
    const nats = h.natsConnection?.();
    if (nats && !nats.isClosed() && nats.serverName() === target.name && nats.listen()) out.add(nats.listen());
  }
  const current = first.listen();
  for (const s of first.pool()) if (s !== current) out.add(s);
  return [...out];
}

const rebalanceActor = (
  queue: NatsSeam[],
  candidates: string[],
  target: ReturnType<typeof targetOf>,
  request: RebalanceRequest,
  deps: { readonly registry: ActorRegistry; readonly log: Logger },
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { log } = deps;
    const base = { account: request.account, server: request.server };
    log.info({ ...base, connections: queue.length, over_ms: request.overMs, candidates }, "rebalance: started");
    // Moves that finish after the actor stopped (its scope closed) are not news.
    const stopped = () => actor.getSnapshot().status !== "active";
    const actor = yield* startMachine(adminRebalanceMachine, {
      input: {
        connections: queue.length,
        overMs: request.overMs,
        candidates,
        target: request.server,
        moveTimeoutMs: MOVE_TIMEOUT_MS + 1_000,
      },
      registry: deps.registry,
      on: {
        move: ({ index, url }) => {
          const nats = queue[index];
          if (!nats || nats.isClosed()) {
            actor.send({ type: "SKIPPED" });
            return;
          }
          const from = nats.serverName();
          void nats.moveTo(url, MOVE_TIMEOUT_MS).then(
            (r) => {
              if (stopped()) return;
              const landed =
                r.reconnected && (target.kind === "url" ? r.listen === target.listen : r.server === target.name);
              log.debug({ ...base, index, url, from, to: r.server, landed }, "rebalance: moved a NATS connection");
              actor.send({ type: "MOVED", landed, server: r.server, url });
            },
            (e: unknown) => {
              if (!stopped()) actor.send({ type: "MOVE_FAILED", reason: e instanceof Error ? e.message : String(e) });
            },
          );
        },
        done: ({ moved, missed, skipped }) => log.info({ ...base, moved, missed, skipped }, "rebalance: done"),
        stopped: ({ reason, moved }) => log.warn({ ...base, moved, reason }, "rebalance: stopped"),
      },
    });
    yield* awaitDone(actor);
  });
