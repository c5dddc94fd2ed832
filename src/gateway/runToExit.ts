import { Cause, Effect, Exit, type Scope } from "effect";
import type { GatewayConfig } from "../config/schema.js";
import type { Logger } from "../log.js";
import { startFailure } from "./startupErrors.js";
import { VERSION } from "./version.js";

/**
 * Runs a gateway process (a lone gateway, a worker, or the primary of `--workers`) to its
 * exit code, with the start and stop log lines. A start that fails is one plain line on
 * stderr and exit 2, like a config problem: the operator reads it, not a log parser (CONTRACT).
 */
export async function runToExit(
  config: GatewayConfig,
  log: Logger,
  starting: Record<string, unknown>,
  program: Effect.Effect<number, unknown, Scope.Scope>,
): Promise<number> {
  log.info(
    { id: config.id, generated: config.source.id_generated, version: VERSION, ...starting },
    "mq-gateway starting",
  );
  const exit = await Effect.runPromiseExit(Effect.scoped(program));
  if (Exit.isSuccess(exit)) {
    log.info({ id: config.id, exit_code: exit.value }, "mq-gateway stopped");
    return exitSoon(exit.value);
  }
  const failure = startFailure(exit.cause);
  if (failure.bug)
    log.error({ cause: Cause.pretty(exit.cause) }, "mq-gateway could not start (a bug: please report it)");
  log.flush();
  process.stderr.write(`mq-gateway: ${failure.line}\n`);
  return exitSoon(2);
}

/** How long a stopped gateway lets what is still open (sockets closing, log writes) finish before the process exits. */
export const EXIT_GRACE_MS = 2_000;

/**
 * Once the gateway has stopped its exit code is known: nothing left open may hold the
 * process. A NATS connection still reconnecting to a server already gone (nats.js tries
 * ten times, two seconds apart) kept a run that could not bind its port alive 20 s after
 * "mq-gateway stopped". The process exits as soon as nothing is open, at most after
 * EXIT_GRACE_MS.
 */
function exitSoon(code: number): number {
  setTimeout(() => process.exit(code), EXIT_GRACE_MS).unref();
  return code;
}
