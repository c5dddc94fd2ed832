import type { Duplex } from "node:stream";
import { Effect, type Scope } from "effect";
import { mqttConnectionMachine } from "../../machines/mqttConnection.js";
import { awaitDone, startMachine } from "../machineActor.js";
import { MqttClientConnection } from "./connection.js";
import type { MqttDeps } from "./deps.js";

/** One MQTT connection as a supervised actor: its socket, lease and machine live in its scope. */
export const mqttConnectionActor = (
  socket: Duplex,
  remote: string,
  cid: number,
  deps: MqttDeps,
): Effect.Effect<void, never, Scope.Scope> =>
  // Combinators, not Effect.gen: a suspended generator and its frame stay alive for the
  // connection's whole life (docs/performance.md).
  Effect.suspend(() => {
    const client = new MqttClientConnection(socket, remote, cid, deps);
    const settings = deps.settings();
    return Effect.addFinalizer(() =>
      Effect.promise(async () => {
        if (client.wasServing()) deps.metrics.connected("mqtt", client.account(), -1);
        await client.cleanup().catch(() => {});
      }),
    ).pipe(
      Effect.andThen(
        startMachine(mqttConnectionMachine, {
          id: `mqtt-${cid}`,
          input: { connectTimeoutMs: settings.connectTimeoutMs, maxKeepaliveSec: settings.maxKeepaliveSec },
          registry: deps.registry,
          commands: client,
        }),
      ),
      Effect.flatMap((actor) => {
        client.start(actor);
        return awaitDone(actor, () => {
          const { closeReason, request } = actor.getSnapshot().context;
          deps.log.info(
            {
              cid,
              remote,
              client_id: request?.clientId,
              account: client.wasServing() ? client.account() : undefined,
              reason: closeReason,
            },
            "MQTT connection closed",
          );
        });
      }),
    );
  });
