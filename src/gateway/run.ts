import { Cause, Deferred, Effect, Exit, Scope } from "effect";
import { AccountServices } from "../actors/accountServices.js";
import { AccountResolver } from "../actors/accounts.js";
import { Bans } from "../actors/admin/bans.js";
import { lameDuckActor } from "../actors/admin/lameDuck.js";
import { startAdmin } from "../actors/admin/start.js";
import { amqpDoor, amqpSettingsFor } from "../actors/amqp/door.js";
import { Bindings } from "../actors/bindings.js";
import { ClaimAnnouncer } from "../actors/claimAnnouncer.js";
import { NatsBridge, type NatsLease } from "../actors/client/natsBridge.js";
import { ClientRegistry } from "../actors/clients.js";
import { bridgeCredentials } from "../actors/gatewayCredentials.js";
import { serveHttp } from "../actors/http.js";
import { type HostPort, type ListenError, listenTcp, listenTls, listenWebSocket } from "../actors/listeners.js";
import { announceClaims, answerLiveness, requestTakeover } from "../actors/liveness.js";
import type { MachineActor } from "../actors/machineActor.js";
import { startMachine } from "../actors/machineActor.js";
import { MessageStore } from "../actors/messageStore.js";
import { Metrics } from "../actors/metrics.js";
import { ConnectBuffers } from "../actors/mqtt/connectBuffers.js";
import { mqttConnectionActor } from "../actors/mqtt/connectionActor.js";
import type { MqttDeps } from "../actors/mqtt/deps.js";
import { KvSessionStore } from "../actors/mqtt/kvSessionStore.js";
import { RetainedMessages } from "../actors/mqtt/retained.js";
import { SessionDirectory } from "../actors/mqtt/sessionDirectory.js";
import { SessionSweeper } from "../actors/mqtt/sessionSweeper.js";
import { sweepActor } from "../actors/mqtt/sweepActor.js";
import { natsTlsOptions } from "../actors/natsTls.js";
import { NoAuthBridge } from "../actors/noAuthBridge.js";
import { Quotas } from "../actors/quotas.js";
import { ActorRegistry } from "../actors/registry.js";
import { Reloader } from "../actors/reload.js";
import { SocketGate } from "../actors/socketGate.js";
import { statechartsRoutes } from "../actors/statechartsPage.js";
import { Supervisor } from "../actors/supervisor.js";
import { scopedTracing } from "../actors/tracing/tracing.js";
import type { GatewayConfig } from "../config/schema.js";
import { createLogger, type Logger } from "../log.js";
import { gatewayMachine } from "../machines/gateway.js";
import { machines } from "../machines/index.js";
import { joinEmbedded, startEmbedded } from "./embeddedStart.js";
import { EXPOSED_WARNING, exposedListeners } from "./exposure.js";
import { mqttSettingsOf } from "./mqttSettings.js";
import { runToExit } from "./runToExit.js";
import { type ListenerName, listenFailure, natsUnreachable, startFailure } from "./startupErrors.js";
import { VERSION } from "./version.js";
import { gatewayViews, viewRoutes } from "./views.js";
import { answerPrimary, tellPrimaryServing, type WorkerRole } from "./workerChannel.js";
import { WorkerCharts } from "./workerCharts.js";

/** Runs the gateway until it stops; resolves to the process exit code (CONTRACT). */
export function runGateway(config: GatewayConfig, role?: WorkerRole): Promise<number> {
  const log = createLogger(config.log);
  return runToExit(config, log, role ? { worker: role.index } : {}, gateway(config, log, role));
}

const gateway = (
  initial: GatewayConfig,
  log: Logger,
  role: WorkerRole | undefined,
): Effect.Effect<number, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    // Reassigned by a reload (SIGHUP): everything that reads it per new connection or request sees the new one.
    let config = initial;
    const registry = new ActorRegistry();
    const metrics = new Metrics(
      registry,
      { version: VERSION, id: config.id },
      {
        subscriptions: () => clients.subscriptionCounts(),
        storedWaiting: () => clients.storedWaitingCount(),
        jetStreamApiWaiting: () => services.apiWaiting(),
        bytes: () => gate.bytes(),
      },
    );
    // Each worker's series keep apart when the primary merges them (workersHttp.ts).
    if (role) metrics.registry.setDefaultLabels({ worker: String(role.index) });
    const supervisor = yield* Supervisor.make(log);
    const clients = new ClientRegistry();
    const directory = new SessionDirectory();
    const exitCode = yield* Deferred.make<number>();
    const closers: Array<() => void> = [];

    // NATS: the servers configured, else an embedded one we own, with its own admin user
    // (docs/decisions/embedded-nats.md).
    let servers = [...config.nats.servers];
    let adminConfig = config;
    if (servers.length === 0) {
      // A worker of `run --workers` joins the primary's embedded server; otherwise it is ours.
      const embedded = role?.natsUrl
        ? yield* joinEmbedded(config, role.natsUrl)
        : yield* startEmbedded(config, { log, registry, onRestart: () => metrics.embeddedRestarted() });
      servers = [embedded.url];
      adminConfig = { ...config, admin: embedded.admin };
    }

    const bridgeOptions = {
      servers,
      gatewayId: config.id,
      supervisor,
      registry,
      log,
      tls: natsTlsOptions(config.nats.tls),
      onReconnect: () => metrics.natsReconnected(),
    };
    const bridge = config.nats.servers.length === 0 ? new NoAuthBridge(bridgeOptions) : new NatsBridge(bridgeOptions);
    // The gateway's own connection: health, and later KV/JetStream work in its account.
    // The gateway's own connection: its first gateway user when accounts are configured
    // (a server that requires auth has no anonymous user), else anonymous.
    const [coreAccount, coreUser] = Object.entries(config.gateway_users)[0] ?? [];
    const core: NatsLease = yield* Effect.tryPromise({
      try: async () => bridge.acquire(coreUser ? await bridgeCredentials(coreUser) : {}, "gateway"),
      catch: (e) =>
        natsUnreachable(
          servers,
          e,
          config.nats.servers.length === 0,
          coreUser && coreAccount !== undefined ? { account: coreAccount, credentials: coreUser } : undefined,
        ),
    });
    yield* Effect.addFinalizer(() => Effect.sync(() => core.release()));
    log.info(
      { servers, server_version: core.nats.info()?.version, server_name: core.nats.info()?.server_name },
      "connected to NATS",
    );

    // Said once per user: what that client cannot do, and what would tell its account (docs/decisions/client-account.md).
    const unknownAccountOf = new Set<string>();
    const accounts = new AccountResolver(() => config.routing, {
      gatewayAccounts: () => Object.keys(config.gateway_users),
      gatewayConnection: async (account) => (await services.jetstream(account)).lease.nats,
      learnt: (username, account, via) => log.debug({ user: username ?? null, account, via }, "client account learnt"),
      unknown: (username) => {
        const user = username ?? "";
        if (
          Object.keys(config.gateway_users).length === 0 ||
          unknownAccountOf.has(user) ||
          unknownAccountOf.size >= 1_000
        )
          return;
        unknownAccountOf.add(user);
        log.warn(
          { user: username ?? null },
          "the NATS account of this user is unknown (nats-server did not name it at CONNECT, the user may not ask $SYS.REQ.USER.INFO, and no gateway user's $SYS.REQ.ACCOUNT.PING.CONNZ lists it): what the gateway keeps for it in its account (the MQTT store's copies of its QoS 1/2 publishes, its session, its retained messages) fails; name its account in routing (docs/accounts.md)",
        );
      },
    });
    const services = new AccountServices(
      bridge,
      core,
      () => config,
      log,
      () => accounts.resolve(core.nats, undefined),
    );
    const messages = new MessageStore(services, () => config, log);
    const bindings = new Bindings(log, async (account) =>
      account === null ? core.nats : (await services.jetstream(account)).lease.nats,
    );
    yield* Effect.promise(() => bindings.load(config.bindings));
    // The gateway's own streams that exist with fewer replicas than wanted are named at start (streamReplicas.ts).
    const startAccounts = Object.keys(config.gateway_users);
    for (const account of startAccounts.length > 0 ? startAccounts : [""]) {
      void services
        .reportReplicas(account)
        .catch((e: Error) => log.debug({ account, err: e.message }, "replicas not checked"));
    }
    // With gateway users, each account's liveness actor answers there (src/actors/admin/liveness.ts).
    if (Object.keys(config.gateway_users).length === 0) {
      const liveness = answerLiveness({ nats: core.nats, id: config.id, clients, directory, log });
      yield* Effect.addFinalizer(() => Effect.sync(() => liveness.unsubscribe()));
    }
    const claims = new ClaimAnnouncer(
      (account, payload) =>
        void services.jetstream(account).then(
          ({ lease }) => announceClaims(lease.nats, config.id, payload),
          () => {},
        ),
    );
    const sessionStore = yield* KvSessionStore.scoped(services);
    const sweepEvery = config.mqtt.session_sweep_interval;
    if (sweepEvery > 0) {
      const sweeper = new SessionSweeper(
        services,
        sessionStore,
        directory,
        config.id,
        sweepEvery,
        log,
        (account) => [
          ...(messages.enabled() ? [messages.streamName()] : []),
          ...bindings.of(account).map((b) => b.stream),
        ],
        (account, n) => metrics.orphanConsumersRemoved(account, n),
      );
      const accounts = () => new Set([...sessionStore.accounts(), ...Object.keys(config.gateway_users)]);
      supervisor.spawn("sessionSweeper", "sessionSweeper", sweepActor(sweeper, sweepEvery, accounts));
    }
    // Before the doors open: their first message is traced.
    const tracing = yield* scopedTracing(config.tracing, { id: config.id, version: VERSION }, log);
    let mqttSettings = mqttSettingsOf(config, core.nats.info()?.max_payload, tracing);
    // The cap follows the server the gateway is connected to (a reconnect may reach another).
    const currentMqttSettings = () => {
      const maxPayload = core.nats.info()?.max_payload;
      if (maxPayload !== undefined && maxPayload !== mqttSettings.natsMaxPayload)
        mqttSettings = mqttSettingsOf(config, maxPayload, tracing);
      return mqttSettings;
    };
    // Shared by every gateway through the admin account (docs/decisions/bans.md); checked at each CONNECT and open.
    const bans = new Bans(log);
    // Read at each publish: a reload applies to connected clients too (docs/decisions/quotas.md).
    const quotas = new Quotas(() => config.limits, metrics);
    const mqttDeps: MqttDeps = {
      bridge,
      clients,
      registry,
      session: {
        services,
        bindings,
        messages,
        retained: new RetainedMessages(services),
        store: sessionStore,
        gatewayId: config.id,
        registry,
        parked: directory.parked,
      },
      metrics,
      log,
      settings: currentMqttSettings,
      accountOf: (lease, username) => accounts.resolve(lease.nats, username),
      maxConnectionsPerAccount: () => config.limits.max_connections_per_account,
      bans: bans.list,
      quotas,
      connectBuffers: new ConnectBuffers(() => config.limits.max_connect_buffer),
      directory,
      announce: (account, clientId, cleanStart) => claims.announce(account, clientId, cleanStart),
      remoteTakeover: async (account, clientId, owner, cleanStart) =>
        requestTakeover((await services.jetstream(account)).lease.nats, owner, account, clientId, cleanStart),
    };

    // New clients are taken only while the gateway machine says so (opening, serving).
    let gw: MachineActor<typeof gatewayMachine> | undefined;
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
    const listen = <A>(
      name: ListenerName,
      at: HostPort | null,
      open: (at: HostPort) => Effect.Effect<A, ListenError, Scope.Scope>,
    ) =>
      at
        ? open(at).pipe(
            Effect.mapError((e) => listenFailure(name, at, e)),
            Effect.tap((server) =>
              Effect.sync(() => {
                listeners[name] =
                  `${at.host}:${(server as { address?: () => { port: number } }).address?.()?.port ?? at.port}`;
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
      messages,
      supervisor,
      settings: amqpSettingsFor(() => config, tracing),
      accountOf: (lease, username) => accounts.resolve(lease.nats, username),
      gatewayId: config.id,
      version: VERSION,
      accepting,
      maxConnectionsPerAccount: () => config.limits.max_connections_per_account,
      bans: bans.list,
      maxTopicLevels: () => config.limits.max_topic_levels,
      quotas,
    });
    // --- end AMQP ---------------------------------------------------------------------------

    /** Every client door's listeners, in the gateway's scope; opened when the gateway machine says so. */
    const openListeners = Effect.gen(function* () {
      yield* listen("mqtt", config.mqtt.listen, (at) => listenTcp(at, "MQTT", onMqtt, admitMqtt));
      const mqttTls = config.mqtt.tls;
      if (mqttTls)
        yield* listen("mqtt_tls", mqttTls.listen, (at) =>
          listenTls(at, mqttTls, "MQTT over TLS", onMqtt, admitMqtt, config.limits.connect_timeout),
        );
      yield* listen("mqtt_ws", config.mqtt.websocket, (at) =>
        listenWebSocket(at, "/mqtt", onMqtt, admitMqtt, () => config.limits.connect_timeout),
      );
      yield* listen("amqp", config.amqp.listen, (at) => listenTcp(at, "AMQP", onAmqp, admitAmqp));
      const amqpTls = config.amqp.tls;
      if (amqpTls)
        yield* listen("amqp_tls", amqpTls.listen, (at) =>
          listenTls(at, amqpTls, "AMQP over TLS", onAmqp, admitAmqp, config.limits.connect_timeout),
        );
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
              if (role) tellPrimaryServing(listeners);
              const exposed = exposedListeners(config);
              if (exposed.length > 0) log.warn({ exposed }, EXPOSED_WARNING);
              return;
            }
            // One plain line on stderr naming the port, its key and its flag (startupErrors.ts), then exit 2.
            const failure = startFailure(opened.cause);
            if (failure.bug)
              log.error({ cause: Cause.pretty(opened.cause) }, "mq-gateway could not start (a bug: please report it)");
            log.flush();
            process.stderr.write(`mq-gateway: ${failure.line}\n`);
            gw!.send({ type: "START_FAILED", reason: failure.line });
          }),
        close_listeners: () => {
          for (const c of closers.splice(0)) c();
        },
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
              done: () => gw!.send({ type: "CLIENTS_DRAINED" }),
            }),
          ),
        close_clients: () => {
          for (const c of clients.all()) c.shutdown();
          // Give each client's actor a moment to say goodbye and each MQTT session to save its
          // record (the directory holds a session until it is saved), then stop regardless: a
          // save still under way when NATS closes leaves its record marked connected, settled
          // later as after a crash (all 300 of stopSaves.test.ts before this waited).
          void waitUntil(() => clients.size() === 0 && directory.size() === 0, STOP_SAVES_MS).then(() => {
            directory.parked.stopAll();
            gw!.send({ type: "STOPPED" });
          });
        },
        shutdown: ({ exitCode: code }) => Deferred.doneUnsafe(exitCode, Effect.succeed(code)),
      },
    });

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
      sessions: sessionStore,
      bans,
      group: role?.primaryId,
    });

    const views = gatewayViews({ id: config.id, gateway: gw, core, admin, listeners, clients, registry, metrics });
    if (role) {
      // A worker's HTTP is the primary's: it answers the primary's questions instead (workerChannel.ts).
      const channel = answerPrimary(views, new WorkerCharts(config.id, registry, clients));
      yield* Effect.addFinalizer(() => Effect.sync(() => channel.close()));
    } else if (config.http.listen) {
      const httpAt = config.http.listen;
      const httpPort = yield* serveHttp(httpAt, {
        ...viewRoutes(views),
        ...statechartsRoutes({ machines, registry, clients, supervisor }),
      }).pipe(Effect.mapError((e) => listenFailure("http", httpAt, e)));
      listeners.http = `${config.http.listen.host}:${httpPort}`;
    }

    const reloader = new Reloader(
      () => config,
      async (next, changed) => {
        config = next;
        mqttSettings = mqttSettingsOf(next, core.nats.info()?.max_payload, tracing);
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
        signals.forEach(([sig, fn]) => process.off(sig, fn));
        process.off("unhandledRejection", onRejection);
      }),
    );

    // The listeners open now (open_listeners); "mq-gateway serving" is logged once they all listen.
    gw.send({ type: "STARTED" });
    return yield* Deferred.await(exitCode);
  });

/** How long a stop waits for the clients to go and the sessions to be saved. */
const STOP_SAVES_MS = 10_000;

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
