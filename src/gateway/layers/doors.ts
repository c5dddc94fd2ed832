// The client doors: what an MQTT or AMQP connection actor is given (settings, quotas,
// bans, tracing), and the listeners that accept them. The listeners open only when the
// gateway machine says so, in the scope they are given (the gateway's outermost: they
// close first at a stop).
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { Context, Effect, Layer, type Scope } from "effect";
import { Bans } from "../../actors/admin/bans.js";
import { amqpDoor, amqpSettingsFor } from "../../actors/amqp/door.js";
import {
  type HostPort,
  type ListenError,
  listenTcp,
  listenTls,
  listenWebSocket,
  remoteOf,
} from "../../actors/listeners.js";
import { requestTakeover } from "../../actors/liveness.js";
import { ConnectBuffers } from "../../actors/mqtt/connectBuffers.js";
import { mqttConnectionActor } from "../../actors/mqtt/connectionActor.js";
import type { MqttDeps } from "../../actors/mqtt/deps.js";
import { Quotas } from "../../actors/quotas.js";
import { scopedTracing } from "../../actors/tracing/tracing.js";
import type { GatewayConfig } from "../../config/schema.js";
import { mqttSettingsOf } from "../mqttSettings.js";
import { receiveHandoffs, sessionHomes } from "../sessionHomes.js";
import { type ListenerName, listenFailure, type StartupError } from "../startupErrors.js";
import { VERSION } from "../version.js";
import { Actors, Telemetry } from "./actors.js";
import { Liveness } from "./liveness.js";
import { Nats } from "./nats.js";
import { Settings } from "./settings.js";
import { Accounts, Sessions, Stores } from "./stores.js";

export class Doors extends Context.Service<
  Doors,
  {
    /** Shared by every gateway through the admin account (docs/decisions/bans.md); checked at each CONNECT and open. */
    readonly bans: Bans;
    /** Each open listener's `host:port`, by name (health, the "serving" line). */
    readonly listeners: Record<string, string>;
    /** Opens every configured listener in the given scope; new clients are taken only while `accepting`. */
    readonly open: (accepting: () => boolean) => Effect.Effect<void, StartupError, Scope.Scope>;
    /** Closes the listeners now (lame duck, stop): open sockets stay. */
    readonly close: () => void;
    /** A reload: the MQTT settings follow the new configuration. */
    readonly reloaded: (next: GatewayConfig) => void;
  }
>()("mq-gateway/Doors") {
  static readonly layer = Layer.effect(
    Doors,
    Effect.gen(function* () {
      const { config, log, role } = yield* Settings;
      const { supervisor, registry, clients, directory } = yield* Actors;
      const { metrics, gate } = yield* Telemetry;
      const { bridge, core } = yield* Nats;
      const { resolver, services } = yield* Accounts;
      const { messages, bindings, retained } = yield* Stores;
      const { claims } = yield* Liveness;
      const { store } = yield* Sessions;
      const id = config().id;
      // Before the doors open: their first message is traced.
      const tracing = yield* scopedTracing(config().tracing, { id, version: VERSION }, log);
      let mqttSettings = mqttSettingsOf(config(), core.nats.info()?.max_payload, tracing);
      // The cap follows the server the gateway is connected to (a reconnect may reach another).
      const currentMqttSettings = () => {
        const maxPayload = core.nats.info()?.max_payload;
        if (maxPayload !== undefined && maxPayload !== mqttSettings.natsMaxPayload)
          mqttSettings = mqttSettingsOf(config(), maxPayload, tracing);
        return mqttSettings;
      };
      const bans = new Bans(log);
      // Read at each publish: a reload applies to connected clients too (docs/decisions/quotas.md).
      const quotas = new Quotas(() => config().limits, metrics);
      const mqttDeps: MqttDeps = {
        bridge,
        clients,
        registry,
        session: { services, bindings, messages, retained, store, gatewayId: id, registry, parked: directory.parked },
        metrics,
        log,
        settings: currentMqttSettings,
        accountOf: (lease, username) => resolver.resolve(lease.nats, username),
        accountNow: (lease, username) => resolver.known(lease.nats, username),
        maxConnectionsPerAccount: () => config().limits.max_connections_per_account,
        bans: bans.list,
        quotas,
        connectBuffers: new ConnectBuffers(() => config().limits.max_connect_buffer),
        homes: role ? sessionHomes(role) : undefined,
        directory,
        announce: (account, clientId, cleanStart) => claims.announce(account, clientId, cleanStart),
        remoteTakeover: async (account, clientId, owner, cleanStart) =>
          requestTakeover((await services.jetstream(account)).lease.nats, owner, account, clientId, cleanStart),
      };

      // Set by open: the gateway machine's word on whether new clients are taken (opening, serving).
      let accepting = () => false;
      // limits.max_connections counts accepted sockets of both doors, from accept to close
      // (socketGate.ts), so sockets that never finish CONNECT / open count too.
      const admitMqtt = (socket: Socket) => gate.admit(socket, "mqtt");
      const admitAmqp = (socket: Socket) => gate.admit(socket, "amqp");
      const onMqtt = (stream: Duplex, remote: string) => {
        if (!accepting()) return stream.destroy();
        const cid = clients.allocateCid();
        supervisor.spawn(`mqtt:${cid}`, "mqttConnection", mqttConnectionActor(stream, remote, cid, mqttDeps));
      };
      // AMQP 1.0 door (issue 4; src/actors/amqp).
      const onAmqp = amqpDoor({
        bridge,
        clients,
        registry,
        metrics,
        log,
        bindings,
        messages,
        supervisor,
        settings: amqpSettingsFor(config, tracing),
        accountOf: (lease, username) => resolver.resolve(lease.nats, username),
        gatewayId: id,
        version: VERSION,
        accepting: () => accepting(),
        maxConnectionsPerAccount: () => config().limits.max_connections_per_account,
        bans: bans.list,
        maxTopicLevels: () => config().limits.max_topic_levels,
        quotas,
      });

      const listeners: Record<string, string> = {};
      const closers: Array<() => void> = [];
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

      const open = (acceptingNow: () => boolean) =>
        Effect.gen(function* () {
          accepting = acceptingNow;
          const c = config();
          const timeout = c.limits.connect_timeout;
          yield* listen("mqtt", c.mqtt.listen, (at) => listenTcp(at, "MQTT", onMqtt, admitMqtt));
          if (role && c.mqtt.listen) {
            // Sockets other workers read a CONNECT on, whose session lives here (docs/decisions/session-homes.md).
            const stop = receiveHandoffs(role, (socket, read) => {
              if (!accepting()) return false;
              if (!admitMqtt(socket)) return true;
              socket.unshift(read);
              onMqtt(socket, remoteOf(socket));
              return true;
            });
            yield* Effect.addFinalizer(() => Effect.sync(stop));
          }
          const mqttTls = c.mqtt.tls;
          if (mqttTls)
            yield* listen("mqtt_tls", mqttTls.listen, (at) =>
              listenTls(at, mqttTls, "MQTT over TLS", onMqtt, admitMqtt, timeout),
            );
          yield* listen("mqtt_ws", c.mqtt.websocket, (at) =>
            listenWebSocket(at, "/mqtt", onMqtt, admitMqtt, () => config().limits.connect_timeout),
          );
          yield* listen("amqp", c.amqp.listen, (at) => listenTcp(at, "AMQP", onAmqp, admitAmqp));
          const amqpTls = c.amqp.tls;
          if (amqpTls)
            yield* listen("amqp_tls", amqpTls.listen, (at) =>
              listenTls(at, amqpTls, "AMQP over TLS", onAmqp, admitAmqp, timeout),
            );
        });
      return {
        bans,
        listeners,
        open,
        close: () => {
          for (const c of closers.splice(0)) c();
        },
        reloaded: (next) => {
          mqttSettings = mqttSettingsOf(next, core.nats.info()?.max_payload, tracing);
        },
      };
    }),
  );
}
