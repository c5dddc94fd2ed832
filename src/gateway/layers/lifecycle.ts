// The gateway machine (src/machines/gateway.ts) and what it commands: open the listeners,
// close them, drain the clients (lame duck), close them, and the exit code.
import { Cause, Context, Deferred, Effect, Exit, Layer, Scope } from "effect";
import { lameDuckActor } from "../../actors/admin/lameDuck.js";
import { type MachineActor, startMachine } from "../../actors/machineActor.js";
import { gatewayMachine } from "../../machines/gateway.js";
import { EXPOSED_WARNING, exposedListeners } from "../exposure.js";
import { startFailure } from "../startupErrors.js";
import { tellPrimaryServing } from "../workerChannel.js";
import { Actors } from "./actors.js";
import { Doors } from "./doors.js";
import { Settings } from "./settings.js";

/** How long a stop waits for the clients to go and the sessions to be saved. */
const STOP_SAVES_MS = 10_000;

export class Lifecycle extends Context.Service<
  Lifecycle,
  {
    readonly gateway: MachineActor<typeof gatewayMachine>;
    /**
     * Starts the gateway machine and waits for its exit code. The listeners open in the
     * caller's scope, so they are closed before anything the layers hold.
     */
    readonly serve: Effect.Effect<number, never, Scope.Scope>;
  }
>()("mq-gateway/Lifecycle") {
  static readonly layer = Layer.effect(
    Lifecycle,
    Effect.gen(function* () {
      const { config, log, role } = yield* Settings;
      const { supervisor, registry, clients, directory } = yield* Actors;
      const doors = yield* Doors;
      const exitCode = yield* Deferred.make<number>();
      let listenScope = yield* Effect.scope;
      // Work the machine starts without waiting for it: a fiber in the listeners' scope.
      const fork = (work: Effect.Effect<void>) => void Effect.runSync(Effect.forkIn(work, listenScope));

      // New clients are taken only while the gateway machine says so (opening, serving).
      const accepting = () => gw.getSnapshot().hasTag("accepting") === true;
      const openListeners = Effect.gen(function* () {
        const opened = yield* Effect.exit(Scope.provide(doors.open(accepting), listenScope));
        if (Exit.isSuccess(opened)) {
          gw.send({ type: "LISTENING" });
          log.info({ id: config().id, listeners: doors.listeners }, "mq-gateway serving");
          if (role) tellPrimaryServing(doors.listeners);
          const exposed = exposedListeners(config());
          if (exposed.length > 0) log.warn({ exposed }, EXPOSED_WARNING);
          return;
        }
        // One plain line on stderr naming the port, its key and its flag (startupErrors.ts), then exit 2.
        const failure = startFailure(opened.cause);
        if (failure.bug)
          log.error({ cause: Cause.pretty(opened.cause) }, "mq-gateway could not start (a bug: please report it)");
        log.flush();
        process.stderr.write(`mq-gateway: ${failure.line}\n`);
        gw.send({ type: "START_FAILED", reason: failure.line });
      });
      // Give each client's actor a moment to say goodbye and each MQTT session to save its
      // record (the directory holds a session until it is saved), then stop regardless: a
      // save still under way when NATS closes leaves its record marked connected, settled
      // later as after a crash (all 300 of stopSaves.test.ts before this waited).
      const clientsGone = Effect.gen(function* () {
        const started = Date.now();
        while (!(clients.size() === 0 && directory.size() === 0) && Date.now() - started <= STOP_SAVES_MS)
          yield* Effect.sleep("25 millis");
        directory.parked.stopAll();
        gw.send({ type: "STOPPED" });
      });

      const gw: MachineActor<typeof gatewayMachine> = yield* startMachine(gatewayMachine, {
        input: { ldmDurationMs: config().ldm.duration },
        registry,
        on: {
          open_listeners: () => fork(openListeners),
          close_listeners: () => doors.close(),
          drain_clients: ({ overMs }) =>
            supervisor.spawn(
              "lameDuck",
              "lameDuck",
              lameDuckActor({
                clients,
                registry,
                log,
                overMs,
                graceMs: 5_000,
                done: () => gw.send({ type: "CLIENTS_DRAINED" }),
              }),
            ),
          close_clients: () => {
            for (const c of clients.all()) c.shutdown();
            fork(clientsGone);
          },
          shutdown: ({ exitCode: code }) => Deferred.doneUnsafe(exitCode, Effect.succeed(code)),
        },
      });

      const serve = Effect.gen(function* () {
        listenScope = yield* Effect.scope;
        // The listeners open now (open_listeners); "mq-gateway serving" is logged once they all listen.
        gw.send({ type: "STARTED" });
        return yield* Deferred.await(exitCode);
      });
      return { gateway: gw, serve };
    }),
  );
}
