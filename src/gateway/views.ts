// What the gateway's HTTP port shows of one gateway: health, metrics, clients. A lone
// gateway serves them on its own port (viewRoutes); a worker of `run --workers` hands them
// to the primary, which merges every worker's (workerChannel.ts, workersHttp.ts).

import type { AdminStatus } from "../actors/admin/start.js";
import type { NatsLease } from "../actors/client/natsBridge.js";
import type { ClientRegistry } from "../actors/clients.js";
import { type ClientsPage, clientsPage, readQuery } from "../actors/http/clients.js";
import { type Handler, sendJson } from "../actors/http.js";
import type { MachineActor } from "../actors/machineActor.js";
import type { Metrics } from "../actors/metrics.js";
import type { ActorRegistry } from "../actors/registry.js";
import type { gatewayMachine } from "../machines/gateway.js";
import { VERSION } from "./version.js";

export interface Health {
  readonly status: number;
  readonly body: Record<string, unknown> & { status: string; id: string; clients: number };
}

export interface GatewayViews {
  health(): Health;
  readonly metrics: Metrics;
  clients(query: Parameters<typeof clientsPage>[3]): ClientsPage;
}

export function gatewayViews(deps: {
  readonly id: string;
  readonly gateway: MachineActor<typeof gatewayMachine>;
  readonly core: NatsLease;
  readonly admin: AdminStatus;
  readonly listeners: Record<string, string>;
  readonly clients: ClientRegistry;
  readonly registry: ActorRegistry;
  readonly metrics: Metrics;
}): GatewayViews {
  const { core, clients } = deps;
  return {
    health: () => {
      const state = deps.gateway.getSnapshot().value;
      const natsUp = core.connected();
      const healthy = natsUp && state === "serving";
      return {
        status: healthy ? 200 : 503,
        body: {
          status: healthy ? "ok" : state === "lameDuck" ? "lame_duck" : natsUp ? String(state) : "nats_unavailable",
          id: deps.id,
          version: VERSION,
          nats: natsUp ? "connected" : "disconnected",
          nats_server: { version: core.nats.info()?.version ?? null, name: core.nats.info()?.server_name ?? null },
          admin_account: deps.admin.account(),
          admin: deps.admin.state(),
          listeners: deps.listeners,
          clients: clients.size(),
        },
      };
    },
    metrics: deps.metrics,
    clients: (query) => clientsPage(deps.id, clients, deps.registry, query),
  };
}

/** /healthz, /metrics and /clients of one gateway on its own HTTP port. */
export function viewRoutes(views: GatewayViews): Record<string, Handler> {
  return {
    "/healthz": (_req, res) => {
      const { status, body } = views.health();
      sendJson(res, status, body);
    },
    "/metrics": async (_req, res) => {
      const registry = views.metrics.registry;
      res.writeHead(200, { "content-type": registry.contentType }).end(await registry.metrics());
    },
    "/clients": (req, res) => {
      const read = readQuery(new URL(req.url ?? "/", "http://localhost").searchParams);
      if (!read.ok) return sendJson(res, 400, { error: read.error });
      sendJson(res, 200, views.clients(read.query));
    },
  };
}
