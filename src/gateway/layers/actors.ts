// What every actor of the gateway hangs off: the supervisor whose scope holds them all,
// the registries that name them, and the metrics and socket gate that count them.
import { Context, Effect, Layer } from "effect";
import { ClientRegistry } from "../../actors/clients.js";
import { Metrics } from "../../actors/metrics.js";
import { SessionDirectory } from "../../actors/mqtt/sessionDirectory.js";
import { ActorRegistry } from "../../actors/registry.js";
import { SocketGate } from "../../actors/socketGate.js";
import { Supervisor } from "../../actors/supervisor.js";
import { VERSION } from "../version.js";
import { Settings } from "./settings.js";

export class Actors extends Context.Service<
  Actors,
  {
    /** Its scope is released last of all: every actor still running is interrupted after NATS is closed. */
    readonly supervisor: Supervisor;
    readonly registry: ActorRegistry;
    readonly clients: ClientRegistry;
    /** The MQTT sessions this gateway holds, and their parked readers. */
    readonly directory: SessionDirectory;
  }
>()("mq-gateway/Actors") {
  static readonly layer = Layer.effect(
    Actors,
    Effect.gen(function* () {
      const { log } = yield* Settings;
      const supervisor = yield* Supervisor.make(log);
      return {
        supervisor,
        registry: new ActorRegistry(),
        clients: new ClientRegistry(),
        directory: new SessionDirectory(),
      };
    }),
  );
}

export class Telemetry extends Context.Service<
  Telemetry,
  {
    readonly metrics: Metrics;
    /** limits.max_connections over both doors' accepted sockets, and the bytes they moved. */
    readonly gate: SocketGate;
    /**
     * Where the JetStream API waits gauge reads from, once the account services exist: they
     * are built later (on the bridge, which reports its reconnects here), so the gauge is wired late.
     */
    readonly readApiWaitingFrom: (read: () => number) => void;
  }
>()("mq-gateway/Telemetry") {
  static readonly layer = Layer.effect(
    Telemetry,
    Effect.gen(function* () {
      const { config, role } = yield* Settings;
      const { registry, clients } = yield* Actors;
      let apiWaiting = () => 0;
      const gate: SocketGate = new SocketGate(
        () => config().limits.max_connections,
        (protocol) => metrics.refused(protocol, "max_connections"),
      );
      const metrics = new Metrics(
        registry,
        { version: VERSION, id: config().id },
        {
          subscriptions: () => clients.subscriptionCounts(),
          storedWaiting: () => clients.storedWaitingCount(),
          jetStreamApiWaiting: () => apiWaiting(),
          bytes: () => gate.bytes(),
        },
      );
      // Each worker's series keep apart when the primary merges them (workersHttp.ts).
      if (role) metrics.registry.setDefaultLabels({ worker: String(role.index) });
      return {
        metrics,
        gate,
        readApiWaitingFrom: (read) => {
          apiWaiting = read;
        },
      };
    }),
  );
}
