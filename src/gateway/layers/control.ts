// How the gateway is seen and steered from outside: the admin actors (mq-gateway ctl),
// HTTP (health, metrics, statecharts) or, for a worker, the primary's questions, and the
// signals: SIGTERM/SIGINT stop, SIGUSR2 lame duck, SIGHUP reload (CONTRACT).
import { Effect, Layer } from "effect";
import { startAdmin } from "../../actors/admin/start.js";
import { serveHttp } from "../../actors/http.js";
import { Reloader } from "../../actors/reload.js";
import { statechartsRoutes } from "../../actors/statechartsPage.js";
import { machines } from "../../machines/index.js";
import { listenFailure } from "../startupErrors.js";
import { VERSION } from "../version.js";
import { gatewayViews, viewRoutes } from "../views.js";
import { answerPrimary } from "../workerChannel.js";
import { WorkerCharts } from "../workerCharts.js";
import { Actors, Telemetry } from "./actors.js";
import { Doors } from "./doors.js";
import { Lifecycle } from "./lifecycle.js";
import { Nats } from "./nats.js";
import { Settings } from "./settings.js";
import { Accounts, Sessions, Stores } from "./stores.js";

export const Control = Layer.effectDiscard(
  Effect.gen(function* () {
    const settings = yield* Settings;
    const { config, log, role } = settings;
    const { supervisor, registry, clients, directory } = yield* Actors;
    const { metrics } = yield* Telemetry;
    const { servers, adminConfig, bridge, core } = yield* Nats;
    const { services } = yield* Accounts;
    const { bindings } = yield* Stores;
    const { store } = yield* Sessions;
    const doors = yield* Doors;
    const { gateway: gw } = yield* Lifecycle;
    const id = config().id;

    const admin = startAdmin({
      config: adminConfig,
      servers,
      bridge,
      clients,
      directory,
      registry,
      supervisor,
      metrics,
      log,
      gateway: gw,
      version: VERSION,
      services,
      sessions: store,
      bans: doors.bans,
      group: role?.primaryId,
    });

    const listeners = doors.listeners;
    const views = gatewayViews({ id, gateway: gw, core, admin, listeners, clients, registry, metrics });
    const httpAt = config().http.listen;
    if (role) {
      // A worker's HTTP is the primary's: it answers the primary's questions instead (workerChannel.ts).
      const channel = answerPrimary(views, new WorkerCharts(id, registry, clients));
      yield* Effect.addFinalizer(() => Effect.sync(() => channel.close()));
    } else if (httpAt) {
      const httpPort = yield* serveHttp(httpAt, {
        ...viewRoutes(views),
        ...statechartsRoutes({ machines, registry, clients, supervisor }),
      }).pipe(Effect.mapError((e) => listenFailure("http", httpAt, e)));
      listeners.http = `${httpAt.host}:${httpPort}`;
    }

    const reloader = new Reloader(
      config,
      async (next, changed) => {
        settings.replace(next);
        doors.reloaded(next);
        log.level = next.log.level;
        if (changed.includes("bindings") || bindings.hasSkipped()) await bindings.load(next.bindings);
      },
      log,
    );
    const signals: Array<[NodeJS.Signals, () => void]> = [
      ["SIGTERM", () => gw.send({ type: "STOP" })],
      ["SIGINT", () => gw.send({ type: "STOP" })],
      ["SIGUSR2", () => gw.send({ type: "LAME_DUCK" })],
      ["SIGHUP", () => reloader.request()],
    ];
    for (const [sig, fn] of signals) process.on(sig, fn);
    // A promise one client's work forgot to catch must not take every other client down with the
    // process (Node's default): it is logged loudly and the gateway keeps serving.
    const onRejection = (reason: unknown) =>
      log.error({ err: reason }, "unhandled rejection (a bug: please report it)");
    process.on("unhandledRejection", onRejection);
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        for (const [sig, fn] of signals) process.off(sig, fn);
        process.off("unhandledRejection", onRejection);
      }),
    );
  }),
);
