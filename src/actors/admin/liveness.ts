import { Effect, type Scope } from "effect";
import type { Credentials } from "../../config/schema.js";
import type { Logger } from "../../log.js";
import type { NatsBridge } from "../client/natsBridge.js";
import type { ClientRegistry } from "../clients.js";
import { bridgeCredentials } from "../gatewayCredentials.js";
import { answerLiveness } from "../liveness.js";
import type { SessionDirectory } from "../mqtt/sessionDirectory.js";

/**
 * `$MQG.alive.<id>` in one client account, on the gateway user's connection there: the
 * account where that account's sessions bucket lives and other gateways ask. It does not
 * depend on the admin connection. Supervise it with restarts: a refused user is retried.
 */
export const livenessActor = (deps: {
  readonly account: string;
  readonly credentials: Credentials;
  readonly bridge: NatsBridge;
  readonly id: string;
  readonly clients: ClientRegistry;
  readonly directory: SessionDirectory;
  readonly log: Logger;
}): Effect.Effect<void, Error, Scope.Scope> =>
  Effect.gen(function* () {
    const creds = yield* Effect.tryPromise({
      try: () => bridgeCredentials(deps.credentials),
      catch: (e) => new Error(`gateway user of ${deps.account}: ${(e as Error).message}`),
    });
    const lease = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => deps.bridge.acquire(creds),
        catch: (e) => new Error(`gateway user of ${deps.account}: ${(e as Error).message}`),
      }),
      (l) => Effect.sync(() => l.release()),
    );
    const sub = answerLiveness({
      nats: lease.nats,
      id: deps.id,
      clients: deps.clients,
      directory: deps.directory,
      log: deps.log,
      account: deps.account,
    });
    yield* Effect.addFinalizer(() => Effect.sync(() => sub.unsubscribe()));
    deps.log.debug({ account: deps.account }, "answering liveness asks");
    yield* Effect.never;
  });
