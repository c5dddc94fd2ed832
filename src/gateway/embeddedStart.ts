// Starting the embedded nats-server with its admin user (docs/decisions/embedded-nats.md),
// for the one gateway process, or once for every worker by the primary of `run --workers`
// (docs/decisions/workers.md): the workers must share one server, not each start their own.
import { Effect, type Scope } from "effect";
import { embeddedNats } from "../actors/embeddedNats.js";
import { findNatsServer } from "../actors/natsServerBinary.js";
import type { ActorRegistry } from "../actors/registry.js";
import type { Credentials, GatewayConfig } from "../config/schema.js";
import type { Logger } from "../log.js";
import { embeddedAdmin, prepareEmbedded } from "./embeddedAccounts.js";
import { embeddedNatsFailure, noNatsServer, plainMessage, StartupError } from "./startupErrors.js";

export interface EmbeddedStarted {
  readonly url: string;
  /** The embedded server's admin user, for the admin connection. */
  readonly admin: Credentials;
}

/** Runs the embedded nats-server until the scope closes; `gatewayIds` may each serve admin requests. */
export const startEmbedded = (
  config: GatewayConfig,
  deps: { readonly log: Logger; readonly registry: ActorRegistry; readonly onRestart?: () => void },
  gatewayIds: readonly string[] = [config.id],
): Effect.Effect<EmbeddedStarted, StartupError, Scope.Scope> =>
  Effect.gen(function* () {
    const binary = findNatsServer();
    if (!binary) return yield* Effect.fail(noNatsServer());
    const at = config.nats.embedded_listen;
    const setup = yield* Effect.tryPromise({
      try: () => prepareEmbedded(config, gatewayIds),
      catch: (e) => new StartupError({ message: plainMessage(e) }),
    });
    const embedded = yield* embeddedNats({
      binary,
      host: at.host,
      port: at.port,
      dataDir: config.data,
      maxPayload: config.nats.embedded_max_payload,
      writeConfig: setup.writeConfig,
      ...(deps.onRestart ? { onRestart: deps.onRestart } : {}),
      log: deps.log,
      registry: deps.registry,
    }).pipe(Effect.mapError((e) => embeddedNatsFailure(at, e)));
    const adminFile = yield* Effect.tryPromise({
      try: () => setup.writeAdminFile(embedded.url),
      catch: (e) =>
        new StartupError({ message: `cannot write the admin credential for mq-gateway ctl: ${plainMessage(e)}` }),
    });
    deps.log.info({ file: adminFile }, "admin credential for mq-gateway ctl written");
    return { url: embedded.url, admin: setup.admin };
  });

/**
 * A worker's view of the primary's embedded server: its URL, and the admin user the
 * primary made (kept in the data directory's admin file, written before any worker starts).
 */
export const joinEmbedded = (config: GatewayConfig, url: string): Effect.Effect<EmbeddedStarted, StartupError> =>
  Effect.tryPromise({
    try: async () => ({ url, admin: (await embeddedAdmin(config)).credentials }),
    catch: (e) => new StartupError({ message: plainMessage(e) }),
  });
