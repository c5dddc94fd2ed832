import { Cause, Effect, Exit, type Fiber, type Scope } from "effect";

/**
 * The async work an actor starts and does not wait for (a NATS request, a watch loop, a
 * consumer to make) as fibers the actor owns. A failure goes to the handler the actor gave
 * (an event to its machine, a logged and counted line), never to the process's
 * unhandled-rejection logger. When the actor ends, what still runs is interrupted: its
 * AbortSignal fires, and neither what it resolves to nor its failure acts on the ended actor.
 *
 * Not a FiberSet: that is made in a Scope and held for the actor's whole life, and an idle
 * connection (there are 10,000s) has nothing in flight. Here the set exists only while a
 * task runs; each task is one fiber, forked without a fiber to fork it (as supervisor.ts does).
 */
export class ActorTasks {
  /** The tasks running (none: no set), or "closed" once the actor ended (FiberSet's Open and Closed). */
  private running: Set<Fiber.Fiber<unknown, unknown>> | undefined | "closed";

  constructor(private readonly onFailure: (error: unknown) => void) {}

  /** Tasks owned by the current Scope: closed (what runs interrupted) when it closes. */
  static scoped(onFailure: (error: unknown) => void): Effect.Effect<ActorTasks, never, Scope.Scope> {
    return Effect.acquireRelease(
      Effect.sync(() => new ActorTasks(onFailure)),
      (tasks) => Effect.sync(() => tasks.close()),
    );
  }

  /**
   * Starts `work` now (its synchronous part runs before this returns, as a plain call's
   * would); `then` gets what it resolves to, unless the actor ended first. Nothing starts
   * once closed.
   */
  run<A>(work: (signal: AbortSignal) => PromiseLike<A>, then?: (value: A) => void): void {
    if (this.closed) return;
    const fiber: Fiber.Fiber<A, unknown> = Effect.runFork(Effect.tryPromise({ try: work, catch: (e) => e }));
    // Its synchronous part may have ended the actor: then it is not kept either.
    if (this.closed) return fiber.interruptUnsafe();
    const running = (this.running as Set<Fiber.Fiber<unknown, unknown>> | undefined) ?? new Set();
    this.running = running;
    running.add(fiber);
    fiber.addObserver((exit) => {
      running.delete(fiber);
      if (running.size === 0 && this.running === running) this.running = undefined;
      if (this.closed) return;
      try {
        if (Exit.isSuccess(exit)) then?.(exit.value);
        else if (!Cause.hasInterruptsOnly(exit.cause)) this.onFailure(Cause.squash(exit.cause));
      } catch (e) {
        this.onFailure(e);
      }
    });
  }

  private get closed(): boolean {
    return this.running === "closed";
  }

  /** Tasks still running. */
  get size(): number {
    return this.running instanceof Set ? this.running.size : 0;
  }

  /** Interrupts what runs now; later tasks start as before (a watcher that follows a new connection). */
  interrupt(): void {
    if (!this.closed) this.end(undefined);
  }

  /** The actor ended: what runs is interrupted and nothing more starts. */
  close(): void {
    this.end("closed");
  }

  private end(next: undefined | "closed"): void {
    const running = this.running;
    this.running = next;
    if (running instanceof Set) for (const f of running) f.interruptUnsafe();
  }
}
