import type { Duplex } from "node:stream";
import { Effect, type Scope } from "effect";
import { mqttConnectionMachine } from "../../machines/mqttConnection.js";
import { awaitDone, type MachineActor, startOwnedMachine } from "../machineActor.js";
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
    let actor: MachineActor<typeof mqttConnectionMachine> | undefined;
    // One finalizer for the machine and the client (the machine first, as the scope would
    // release a startMachine): Effect's acquireRelease kept its options, acquire and
    // release alive per connection (docs/performance.md, issue 23).
    return Effect.addFinalizer(() =>
      Effect.promise(async () => {
        actor?.retire();
        if (client.wasServing()) deps.metrics.connected("mqtt", client.account(), -1);
        await client.cleanup().catch(() => {});
      }),
    ).pipe(
      Effect.andThen(
        Effect.suspend(() => {
          actor = startOwnedMachine(mqttConnectionMachine, {
            id: `mqtt-${cid}`,
            input: { connectTimeoutMs: settings.connectTimeoutMs, maxKeepaliveSec: settings.maxKeepaliveSec },
            registry: deps.registry,
            commands: client,
          });
          const started = actor;
          client.start(started);
          return awaitDone(started, () => {
            const snapshot = started.getSnapshot();
            const { closeReason } = snapshot.context;
            const fields = {
              cid,
              remote,
              client_id: client.clientId,
              account: client.wasServing() ? client.account() : undefined,
              reason: closeReason,
            };
            // Not closed: served on by another worker, which logs it connected (session-homes.md).
            if (snapshot.value === "handedOff")
              deps.log.debug(fields, "MQTT connection handed to its session's worker");
            else deps.log.info(fields, "MQTT connection closed");
          });
        }),
      ),
    );
  });
