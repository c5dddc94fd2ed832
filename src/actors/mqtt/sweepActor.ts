import { Effect } from "effect";
import type { SessionSweeper } from "./sessionSweeper.js";

/**
 * The sweeper's clock as a supervised actor: a first pass soon after start (a gateway that
 * came back with a new id settles what its earlier life left), then one per interval.
 * A failed pass is logged by the sweeper and tried again at the next tick.
 */
export const sweepActor = (
  sweeper: SessionSweeper,
  intervalMs: number,
  accounts: () => Iterable<string>,
): Effect.Effect<void> =>
  Effect.sleep(Math.min(intervalMs, 10_000)).pipe(
    Effect.andThen(
      Effect.forever(Effect.promise(() => sweeper.sweep(accounts())).pipe(Effect.andThen(Effect.sleep(intervalMs)))),
    ),
  );
