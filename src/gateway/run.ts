// The composition root: the gateway's services as Layers (src/gateway/layers), built in
// one line, each acquiring its resources in its own scope and released in the reverse
// order (docs/README.md, "The gateway's layers").
import { Context, Effect, Layer, type Scope } from "effect";
import type { GatewayConfig } from "../config/schema.js";
import { createLogger, type Logger } from "../log.js";
import { Actors, Telemetry } from "./layers/actors.js";
import { Control } from "./layers/control.js";
import { Doors } from "./layers/doors.js";
import { Lifecycle } from "./layers/lifecycle.js";
import { Liveness } from "./layers/liveness.js";
import { Nats } from "./layers/nats.js";
import { Settings } from "./layers/settings.js";
import { Accounts, Sessions, Stores } from "./layers/stores.js";
import { runToExit } from "./runToExit.js";
import type { WorkerRole } from "./workerChannel.js";

/** Runs the gateway until it stops; resolves to the process exit code (CONTRACT). */
export function runGateway(config: GatewayConfig, role?: WorkerRole): Promise<number> {
  const log = createLogger(config.log);
  return runToExit(config, log, role ? { worker: role.index } : {}, gateway(config, log, role));
}

/**
 * Every service of the gateway, each built on those before it: the order is the start's,
 * and its reverse the stop's (the supervisor, holding every actor, goes last, after NATS).
 */
const gatewayLayer = (config: GatewayConfig, log: Logger, role: WorkerRole | undefined) =>
  Control.pipe(
    Layer.provideMerge(Lifecycle.layer),
    Layer.provideMerge(Doors.layer),
    Layer.provideMerge(Sessions.layer),
    Layer.provideMerge(Liveness.layer),
    Layer.provideMerge(Stores.layer),
    Layer.provideMerge(Accounts.layer),
    Layer.provideMerge(Nats.layer),
    Layer.provideMerge(Telemetry.layer),
    Layer.provideMerge(Actors.layer),
    Layer.provideMerge(Settings.layer(config, log, role)),
  );

const gateway = (
  config: GatewayConfig,
  log: Logger,
  role: WorkerRole | undefined,
): Effect.Effect<number, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    const services = yield* Layer.build(gatewayLayer(config, log, role));
    return yield* Context.get(services, Lifecycle).serve;
  });
