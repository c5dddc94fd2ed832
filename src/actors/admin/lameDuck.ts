import { Effect, type Scope } from "effect";
import type { Logger } from "../../log.js";
import { lameDuckMachine } from "../../machines/adminLameDuck.js";
import type { ClientRegistry } from "../clients.js";
import { awaitDone, startMachine } from "../machineActor.js";
import type { ActorRegistry } from "../registry.js";

/**
 * Lame duck's drain as an actor: asks the clients connected at its start to go (each
 * says goodbye its own way: MQTT 5 DISCONNECT 0x8B, AMQP amqp:connection:forced), paced
 * by the machine, and reports when they are gone or the grace period ran out.
 */
export const lameDuckActor = (deps: {
  readonly clients: ClientRegistry;
  readonly registry: ActorRegistry;
  readonly log: Logger;
  readonly overMs: number;
  readonly graceMs: number;
  readonly done: () => void;
}): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { clients, log } = deps;
    const queue = [...clients.all()];
    log.info({ clients: queue.length, over_ms: deps.overMs }, "lame duck: closing client connections");
    const actor = yield* startMachine(lameDuckMachine, {
      input: { clients: queue.length, overMs: deps.overMs, graceMs: deps.graceMs },
      registry: deps.registry,
      on: {
        close_next: () => {
          // Skip those that left on their own meanwhile.
          let next = queue.shift();
          while (next && clients.get(next.cid) !== next) next = queue.shift();
          next?.shutdown();
        },
        drained: () => {
          log.info("lame duck: every client connection is closed");
          deps.done();
        },
        timed_out: ({ closed }) => {
          log.warn(
            { asked: closed, still_connected: clients.size() },
            "lame duck: clients still connected after the grace period",
          );
          deps.done();
        },
      },
    });
    const unwatch = clients.onChange((change) => {
      if (change === "removed" && clients.size() === 0) actor.send({ type: "CLIENTS_GONE" });
    });
    yield* Effect.addFinalizer(() => Effect.sync(unwatch));
    yield* awaitDone(actor);
  });
