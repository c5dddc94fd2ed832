import { Effect } from "effect";
import type { GatewayConfig } from "../../config/schema.js";
import type { Logger } from "../../log.js";
import type { gatewayMachine } from "../../machines/gateway.js";
import type { AccountServices } from "../accountServices.js";
import type { NatsBridge } from "../client/natsBridge.js";
import type { ClientRegistry } from "../clients.js";
import type { MachineActor } from "../machineActor.js";
import type { Metrics } from "../metrics.js";
import type { KvSessionStore } from "../mqtt/kvSessionStore.js";
import type { SessionDirectory } from "../mqtt/sessionDirectory.js";
import { natsTlsOptions } from "../natsTls.js";
import type { ActorRegistry } from "../registry.js";
import { type Supervisor, withRestarts } from "../supervisor.js";
import { banMatcher } from "./banList.js";
import type { Bans } from "./bans.js";
import { AdminConnection } from "./connection.js";
import { startLameDuck } from "./ldm.js";
import { livenessActor } from "./liveness.js";
import { rebalancer } from "./rebalance.js";
import { ADMIN_OP_SCOPES, serveAdminRequest } from "./requests.js";
import { AccountScopes } from "./scopes.js";

export interface AdminStatus {
  /** The admin account's name while admin requests are served; null otherwise (or without admin credentials). */
  account(): string | null;
  /** `off` without admin credentials, else the admin connection's state. */
  state(): string;
}

const KICK_TIMEOUT_MS = 5_000;

/**
 * Starts the operator-facing actors: the admin connection (with `admin` credentials
 * only) and the liveness answer in each gateway-user account. Both run under the
 * supervisor with restarts and never hold up MQTT or AMQP clients.
 */
export function startAdmin(deps: {
  readonly config: GatewayConfig;
  readonly servers: readonly string[];
  readonly bridge: NatsBridge;
  readonly clients: ClientRegistry;
  readonly directory: SessionDirectory;
  readonly registry: ActorRegistry;
  readonly supervisor: Supervisor;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly gateway: MachineActor<typeof gatewayMachine>;
  readonly version: string;
  readonly services: AccountServices;
  readonly sessions: KvSessionStore;
  readonly bans: Bans;
  /** The primary's id when this gateway is one of its workers (`run --workers`). */
  readonly group?: string | undefined;
}): AdminStatus {
  const { config, clients, supervisor, log } = deps;
  deps.metrics.adminOpsKnown(ADMIN_OP_SCOPES);
  for (const [account, credentials] of Object.entries(config.gateway_users)) {
    const actor = livenessActor({
      account,
      credentials,
      bridge: deps.bridge,
      id: config.id,
      clients,
      directory: deps.directory,
      log,
    });
    supervisor.spawn(`liveness:${account}`, "liveness", withRestarts(`liveness:${account}`, log, Effect.scoped(actor)));
  }
  if (!config.admin) {
    log.info("no admin credentials configured: the admin API is off");
    return { account: () => null, state: () => "off" };
  }
  const scopes = new AccountScopes(clients, Object.keys(config.gateway_users));
  // A ban that comes into force (here or on any gateway) lets go of the clients it matches here.
  deps.bans.list.onBan((ban) => {
    const matches = banMatcher(ban);
    for (const c of clients.all())
      if (matches(c)) {
        log.info({ cid: c.cid, client_id: c.clientId, ban }, "banned client kicked");
        c.kick();
      }
  });
  const since = new Date();
  const rebalance = rebalancer({ clients, registry: deps.registry, supervisor, log });
  const connection: AdminConnection = new AdminConnection({
    credentials: config.admin,
    servers: deps.servers,
    id: config.id,
    log,
    registry: deps.registry,
    scopes,
    tls: natsTlsOptions(config.nats.tls),
    onServing: (nats) => deps.bans.follow(nats),
    stopping: () => {
      const gw = deps.gateway.getSnapshot();
      return gw.status !== "active" || gw.matches("stopping");
    },
    onRequest: (msg) =>
      serveAdminRequest(msg, {
        id: config.id,
        group: deps.group,
        version: deps.version,
        since,
        clients,
        registry: deps.registry,
        supervisor,
        metrics: deps.metrics,
        log,
        servedAccounts: () => scopes.served(),
        maxPayload: () => connection.maxPayload(),
        lameDuck: () => startLameDuck(deps.gateway),
        rebalance,
        kickTimeoutMs: KICK_TIMEOUT_MS,
        store: {
          services: deps.services,
          sessions: deps.sessions,
          bans: deps.bans,
          accountsNamed: () => Object.keys(config.gateway_users).length > 0,
          adminRequest: (subject, body, timeoutMs) => connection.request(subject, body, timeoutMs),
        },
      }),
  });
  supervisor.spawn("admin", "adminConnection", withRestarts("admin", log, Effect.scoped(connection.run())));
  supervisor.spawn("bans", "bans", Effect.never.pipe(Effect.ensuring(Effect.sync(() => deps.bans.stop()))));
  return { account: () => connection.account(), state: () => connection.state() };
}
