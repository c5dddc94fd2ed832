// NATS: the servers configured, else an embedded one we own, with its own admin user
// (docs/decisions/embedded-nats.md); the bridge every client connects through, and the
// gateway's own connection. Released after everything that uses NATS, before the supervisor.
import { Context, Effect, Layer } from "effect";
import { NatsBridge, type NatsLease } from "../../actors/client/natsBridge.js";
import { bridgeCredentials } from "../../actors/gatewayCredentials.js";
import { natsTlsOptions } from "../../actors/natsTls.js";
import { NoAuthBridge } from "../../actors/noAuthBridge.js";
import type { GatewayConfig } from "../../config/schema.js";
import { joinEmbedded, startEmbedded } from "../embeddedStart.js";
import { natsUnreachable } from "../startupErrors.js";
import { Actors, Telemetry } from "./actors.js";
import { Settings } from "./settings.js";

export class Nats extends Context.Service<
  Nats,
  {
    /** The servers the gateway connects to: the configured ones, or the embedded one's URL. */
    readonly servers: readonly string[];
    /** The configuration the admin actors use: with the embedded server's admin user when it is ours. */
    readonly adminConfig: GatewayConfig;
    readonly bridge: NatsBridge;
    /** The gateway's own connection: health, and KV/JetStream work in its account. */
    readonly core: NatsLease;
  }
>()("mq-gateway/Nats") {
  static readonly layer = Layer.effect(
    Nats,
    Effect.gen(function* () {
      const { initial: config, log, role } = yield* Settings;
      const { supervisor, registry } = yield* Actors;
      const { metrics } = yield* Telemetry;
      let servers = [...config.nats.servers];
      let adminConfig = config;
      if (servers.length === 0) {
        // A worker of `run --workers` joins the primary's embedded server; otherwise it is ours.
        const embedded = role?.natsUrl
          ? yield* joinEmbedded(config, role.natsUrl)
          : yield* startEmbedded(config, { log, registry, onRestart: () => metrics.embeddedRestarted() });
        servers = [embedded.url];
        adminConfig = { ...config, admin: embedded.admin };
      }

      const bridgeOptions = {
        servers,
        gatewayId: config.id,
        supervisor,
        registry,
        log,
        tls: natsTlsOptions(config.nats.tls),
        onReconnect: () => metrics.natsReconnected(),
      };
      const bridge = config.nats.servers.length === 0 ? new NoAuthBridge(bridgeOptions) : new NatsBridge(bridgeOptions);
      // The gateway's own connection: its first gateway user when accounts are configured
      // (a server that requires auth has no anonymous user), else anonymous.
      const [coreAccount, coreUser] = Object.entries(config.gateway_users)[0] ?? [];
      const core: NatsLease = yield* Effect.tryPromise({
        try: async () => bridge.acquire(coreUser ? await bridgeCredentials(coreUser) : {}, "gateway"),
        catch: (e) =>
          natsUnreachable(
            servers,
            e,
            config.nats.servers.length === 0,
            coreUser && coreAccount !== undefined ? { account: coreAccount, credentials: coreUser } : undefined,
          ),
      });
      yield* Effect.addFinalizer(() => Effect.sync(() => core.release()));
      log.info(
        { servers, server_version: core.nats.info()?.version, server_name: core.nats.info()?.server_name },
        "connected to NATS",
      );
      return { servers, adminConfig, bridge, core };
    }),
  );
}
