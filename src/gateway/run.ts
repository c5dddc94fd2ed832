import { Cause, Deferred, Effect, Exit, Scope } from "effect";
import type { Actor } from "xstate";
import { AccountResolver } from "../actors/accounts.js";
import { ClientRegistry } from "../actors/clients.js";
import { embeddedNats } from "../actors/embeddedNats.js";
import { sendJson, serveHttp } from "../actors/http.js";
import { type HostPort, listenTcp, listenTls, listenWebSocket } from "../actors/listeners.js";
import { startMachine } from "../actors/machineActor.js";
import { Metrics } from "../actors/metrics.js";
import { mqttConnectionActor } from "../actors/mqtt/connection.js";
import type { MqttDeps } from "../actors/mqtt/deps.js";
import { amqpDoor, amqpSettingsFor } from "../actors/amqp/door.js";
import { KvSessionStore } from "../actors/mqtt/kvSessionStore.js";
import { RetainedMessages } from "../actors/mqtt/retained.js";
import { AccountServices } from "../actors/accountServices.js";
import { bridgeCredentials } from "../actors/gatewayCredentials.js";
import { Bindings } from "../actors/bindings.js";
import { announceClaim, answerLiveness, requestTakeover } from "../actors/liveness.js";
import { SessionDirectory } from "../actors/mqtt/sessionDirectory.js";
import { lameDuckActor } from "../actors/admin/lameDuck.js";
import { startAdmin } from "../actors/admin/start.js";
import { Reloader } from "../actors/reload.js";
import { NatsBridge, type NatsLease } from "../actors/natsBridge.js";
import { findNatsServer } from "../actors/natsServerBinary.js";
import { ActorRegistry } from "../actors/registry.js";
import { statechartsRoutes } from "../actors/statechartsPage.js";
import { Supervisor } from "../actors/supervisor.js";
import { SocketGate } from "../actors/socketGate.js";
import type { GatewayConfig } from "../config/schema.js";
import { createLogger, type Logger } from "../log.js";
import { gatewayMachine } from "../machines/gateway.js";
import { machines } from "../machines/index.js";
import { mqttSettingsOf } from "./mqttSettings.js";
import { VERSION } from "./version.js";

class StartError extends Error {}

/** Runs the gateway until it stops; resolves to the process exit code (CONTRACT). */
export async function runGateway(config: GatewayConfig): Promise<number> {
  const log = createLogger(config.log);
  log.info({ id: config.id, generated: config.source.id_generated, version: VERSION }, "mq-gateway starting");
  const exit = await Effect.runPromiseExit(Effect.scoped(gateway(config, log)));
  if (Exit.isSuccess(exit)) return exit.value;
  const error = exit.cause;
  log.error({ cause: String(error) }, "mq-gateway could not start");
  return 2;
}

const gateway = (initial: GatewayConfig, log: Logger): Effect.Effect<number, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    // Reassigned by a reload (SIGHUP): everything that reads it per new connection or request sees the new one.
    let config = initial;
    const registry = new ActorRegistry();
    const metrics = new Metrics(registry);
    const supervisor = yield* Supervisor.make(log);
    const clients = new ClientRegistry();
    const directory = new SessionDirectory();
    const exitCode = yield* Deferred.make<number>();
    const closers: Array<() => void> = [];

    // NATS: the servers configured, else an embedded one we own.
    let servers = [...config.nats.servers];
    if (servers.length === 0) {
      const binary = findNatsServer();
      if (!binary) {
        return yield* Effect.fail(
          new StartError("no nats-server found: set nats.servers, NATS_SERVER_BIN, or run scripts/nats-server.sh"),
        );
      }
      const at = config.nats.embedded_listen;
      const embedded = yield* embeddedNats({ binary, host: at.host, port: at.port, dataDir: config.data, log, registry });
      servers = [embedded.url];
    }

    const bridge = new NatsBridge({ servers, gatewayId: config.id, supervisor, registry, log });
    // The gateway's own connection: health, and later KV/JetStream work in its account.
    // The gateway's own connection: its first gateway user when accounts are configured
    // (a server that requires auth has no anonymous user), else anonymous.
    const coreUser = Object.values(config.gateway_users)[0];
    const core: NatsLease = yield* Effect.tryPromise({
      try: async () => bridge.acquire(coreUser ? await bridgeCredentials(coreUser) : {}),
      catch: (e) => new StartError(`cannot reach NATS at ${servers.join(", ")}: ${(e as Error).message}`),
    });
    yield* Effect.addFinalizer(() => Effect.sync(() => core.release()));
    log.info({ servers, server_version: core.nc.info?.version, server_name: core.nc.info?.server_name }, "connected to NATS");

    const accounts = new AccountResolver(() => config.routing);
    const services = new AccountServices(bridge, core, () => config, log);
    const bindings = new Bindings(log, async (account) => (account === null ? core.nc : (await services.jetstream(account)).lease.nc));
    yield* Effect.promise(() => bindings.load(config.bindings));
    // With gateway users, each account's liveness actor answers there (src/actors/admin/liveness.ts).
    if (Object.keys(config.gateway_users).length === 0) {
      const liveness = answerLiveness({ nc: core.nc, id: config.id, clients, directory, log });
      yield* Effect.addFinalizer(() => Effect.sync(() => liveness.unsubscribe()));
    }
    let mqttSettings = mqttSettingsOf(config);
    const mqttDeps: MqttDeps = {
      bridge,
      clients,
      registry,
      session: {
        services,
        bindings,
        retained: new RetainedMessages(services),
        store: new KvSessionStore(services),
        gatewayId: config.id,
      },
      metrics,
      log,
      settings: () => mqttSettings,
      accountOf: (lease, username) => accounts.resolve(lease.nc, username),
      maxConnectionsPerAccount: () => config.limits.max_connections_per_account,
      directory,
      announce: (account, clientId) =>
        void services.jetstream(account).then(
          ({ lease }) => announceClaim(lease.nc, config.id, account, clientId),
          () => {},
        ),
      remoteTakeover: async (account, clientId, owner) =>
        requestTakeover((await services.jetstream(account)).lease.nc, owner, account, clientId),
    };

    // New clients are taken only while the gateway machine says so (opening, serving).
    let gw: Actor<typeof gatewayMachine> | undefined;
    const accepting = () => gw?.getSnapshot().hasTag("accepting") === true;
    // limits.max_connections counts accepted sockets of both doors, from accept to close
    // (socketGate.ts), so sockets that never finish CONNECT / open count too.
    const gate = new SocketGate(
      () => config.limits.max_connections,
      (protocol) => metrics.refused(protocol, "max_connections"),
    );
    const admitMqtt = (socket: import("node:net").Socket) => gate.admit(socket, "mqtt");
    const admitAmqp = (socket: import("node:net").Socket) => gate.admit(socket, "amqp");
    const onMqtt = (stream: import("node:stream").Duplex, remote: string) => {
      if (!accepting()) return stream.destroy();
      const cid = clients.allocateCid();
      supervisor.spawn(`mqtt:${cid}`, "mqttConnection", mqttConnectionActor(stream, remote, cid, mqttDeps));
    };

    const listeners: Record<string, string> = {};
    const listen = <A>(name: string, at: HostPort | null, open: (at: HostPort) => Effect.Effect<A, unknown, Scope.Scope>) =>
      at
        ? open(at).pipe(
            Effect.tap((server) =>
              Effect.sync(() => {
                listeners[name] = `${at.host}:${(server as { address?: () => { port: number } }).address?.()?.port ?? at.port}`;
                closers.push(() => (server as { close?: () => void }).close?.());
              }),
            ),
            Effect.asVoid,
          )
        : Effect.void;

    // --- AMQP 1.0 door (issue 4; src/actors/amqp) ---------------------------------------
    const onAmqp = amqpDoor({
      bridge,
      clients,
      registry,
      metrics,
      log,
      bindings,
      supervisor,
      settings: amqpSettingsFor(() => config),
      accountOf: (lease, username) => accounts.resolve(lease.nc, username),
      gatewayId: config.id,
      version: VERSION,
      accepting,
      maxConnectionsPerAccount: () => config.limits.max_connections_per_account,
      maxTopicLevels: () => config.limits.max_topic_levels,
    });
    // --- end AMQP ---------------------------------------------------------------------------

    /** Every client door's listeners, in the gateway's scope; opened when the gateway machine says so. */
    const openListeners = Effect.gen(function* () {
      yield* listen("mqtt", config.mqtt.listen, (at) => listenTcp(at, "MQTT", onMqtt, admitMqtt));
      const mqttTls = config.mqtt.tls;
      if (mqttTls) yield* listen("mqtt_tls", mqttTls.listen, (at) => listenTls(at, mqttTls, "MQTT over TLS", onMqtt, admitMqtt, config.limits.connect_timeout));
      yield* listen("mqtt_ws", config.mqtt.websocket, (at) => listenWebSocket(at, "/mqtt", onMqtt, admitMqtt, () => config.limits.connect_timeout));
      yield* listen("amqp", config.amqp.listen, (at) => listenTcp(at, "AMQP", onAmqp, admitAmqp));
      const amqpTls = config.amqp.tls;
      if (amqpTls) yield* listen("amqp_tls", amqpTls.listen, (at) => listenTls(at, amqpTls, "AMQP over TLS", onAmqp, admitAmqp, config.limits.connect_timeout));
    });
    const scope = yield* Effect.scope;

    gw = yield* startMachine(gatewayMachine, {
      input: { ldmDurationMs: config.ldm.duration },
      registry,
      on: {
        open_listeners: () =>
          void Effect.runPromiseExit(Scope.provide(openListeners, scope)).then((opened) => {
            if (Exit.isSuccess(opened)) {
              gw!.send({ type: "LISTENING" });
              log.info({ id: config.id, listeners }, "mq-gateway serving");
              return;
            }
            const error = Cause.squash(opened.cause);
            const reason = error instanceof Error ? error.message : String(error);
            log.error({ cause: reason }, "mq-gateway could not start");
            gw!.send({ type: "START_FAILED", reason });
          }),
        close_listeners: () => {
          for (const c of closers.splice(0)) c();
        },
        drain_clients: ({ overMs }) =>
          supervisor.spawn(
            "lameDuck",
            "lameDuck",
            lameDuckActor({ clients, registry, log, overMs, graceMs: 5_000, done: () => gw!.send({ type: "CLIENTS_DRAINED" }) }),
          ),
        close_clients: () => {
          for (const c of clients.all()) c.shutdown();
          // Give each client's actor a moment to say goodbye, then stop regardless.
          void waitUntil(() => clients.size() === 0, 3_000).then(() => gw!.send({ type: "STOPPED" }));
        },
        shutdown: ({ exitCode: code }) => Deferred.doneUnsafe(exitCode, Effect.succeed(code)),
      },
    });

    const admin = startAdmin({ config, servers, bridge, clients, directory, registry, supervisor, metrics, log, gateway: gw, version: VERSION });

    if (config.http.listen) {
      const httpPort = yield* serveHttp(config.http.listen, {
        "/healthz": (_req, res) => {
          const state = gw.getSnapshot().value;
          const natsUp = core.connected();
          const healthy = natsUp && state === "serving";
          sendJson(res, healthy ? 200 : 503, {
            status: healthy ? "ok" : state === "lameDuck" ? "lame_duck" : natsUp ? String(state) : "nats_unavailable",
            id: config.id,
            version: VERSION,
            nats: natsUp ? "connected" : "disconnected",
            nats_server: { version: core.nc.info?.version ?? null, name: core.nc.info?.server_name ?? null },
            admin_account: admin.account(),
            admin: admin.state(),
            listeners,
            clients: clients.size(),
          });
        },
        "/metrics": async (_req, res) => {
          res.writeHead(200, { "content-type": metrics.registry.contentType }).end(await metrics.registry.metrics());
        },
        ...statechartsRoutes({ machines, registry, clients, supervisor }),
      });
      listeners.http = `${config.http.listen.host}:${httpPort}`;
    }

    const reloader = new Reloader(
      () => config,
      async (next, changed) => {
        config = next;
        mqttSettings = mqttSettingsOf(next);
        log.level = next.log.level;
        if (changed.includes("bindings")) await bindings.load(next.bindings);
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
    const onRejection = (reason: unknown) => log.error({ err: reason }, "unhandled rejection (a bug: please report it)");
    process.on("unhandledRejection", onRejection);
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        signals.forEach(([sig, fn]) => process.off(sig, fn));
        process.off("unhandledRejection", onRejection);
      }),
    );

    // The listeners open now (open_listeners); "mq-gateway serving" is logged once they all listen.
    gw.send({ type: "STARTED" });
    return yield* Deferred.await(exitCode);
  });

function waitUntil(predicate: () => boolean, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const started = Date.now();
    const tick = () => {
      if (predicate() || Date.now() - started > timeoutMs) resolve();
      else setTimeout(tick, 25).unref();
    };
    tick();
  });
}
