import { Cause, Effect, FiberMap, Schedule, type Scope } from "effect";
import type { Logger } from "../log.js";

/**
 * Runs every actor of the gateway as a fiber keyed by its id. Each actor gets its own
 * Scope (its socket, timers, NATS lease and machine are finalizers there), so stopping
 * one, or one failing, releases exactly its resources and never touches another.
 * Closing the supervisor's own scope interrupts them all, which is how the gateway stops.
 */
export class Supervisor {
  private constructor(
    private readonly fibers: FiberMap.FiberMap<string, void, never>,
    private readonly log: Logger,
  ) {}

  static make(log: Logger): Effect.Effect<Supervisor, never, Scope.Scope> {
    return FiberMap.make<string, void, never>().pipe(Effect.map((fibers) => new Supervisor(fibers, log)));
  }

  /**
   * Starts an actor now (synchronously, so socket callbacks can call it). A second actor
   * with the same id replaces the first: the first is interrupted and cleaned up.
   */
  spawn(id: string, kind: string, actor: Effect.Effect<void, unknown, Scope.Scope>): void {
    const log = this.log;
    // One continuation, not two (exit + flatMap): it is held for the actor's whole life.
    const supervised = Effect.scoped(actor).pipe(
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.void
          : Effect.sync(() =>
              log.error({ actor: kind, id, cause: Cause.pretty(cause) }, "actor failed; its resources were released"),
            ),
      ),
    );
    // One fiber, registered under its id (what FiberMap.run does, without the short-lived
    // fiber that forks it: a connection actor is spawned per CONNECT, docs/performance.md).
    FiberMap.setUnsafe(this.fibers, id, Effect.runFork(supervised));
  }

  /** Interrupts one actor and waits for its finalizers. */
  stop(id: string): Promise<void> {
    return Effect.runPromise(FiberMap.remove(this.fibers, id));
  }

  has(id: string): boolean {
    return FiberMap.hasUnsafe(this.fibers, id);
  }
}

/**
 * Restart policy for shared actors (the bridge, the admin connection, the embedded
 * server's watcher): retry with capped exponential backoff, forever, logging each failure.
 */
export const withRestarts = <A, E, R>(
  name: string,
  log: Logger,
  effect: Effect.Effect<A, E, R>,
): Effect.Effect<A, never, R> =>
  effect.pipe(
    Effect.tapCause((cause) =>
      Effect.sync(() => log.warn({ actor: name, cause: Cause.pretty(cause) }, "shared actor failed; restarting")),
    ),
    Effect.retry(Schedule.min([Schedule.exponential("200 millis"), Schedule.spaced("10 seconds")])),
    Effect.orDie,
  );
