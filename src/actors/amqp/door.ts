import type { Duplex } from "node:stream";
import { installServerPatches } from "../../vendor/rhea.js";
import type { OnConnection } from "../listeners.js";
import type { Supervisor } from "../supervisor.js";
import { type AmqpDeps, amqpConnectionActor } from "./connection.js";

export interface AmqpDoorDeps extends AmqpDeps {
  readonly supervisor: Supervisor;
  /** False once the gateway stops accepting (lame duck, shutdown). */
  readonly accepting: () => boolean;
}

/**
 * The AMQP 1.0 front door: what the TCP and TLS listeners call for each new socket. Each
 * connection becomes a supervised actor (connection.ts); rhea is the codec inside it.
 */
export function amqpDoor(deps: AmqpDoorDeps): OnConnection {
  installServerPatches();
  return (stream: Duplex, remote: string) => {
    // limits.max_connections was applied on accept, to the raw socket (socketGate.ts).
    if (!deps.accepting()) return void stream.destroy();
    const cid = deps.clients.allocateCid();
    deps.supervisor.spawn(`amqp:${cid}`, "amqpConnection", amqpConnectionActor(stream, remote, cid, deps));
  };
}

export { amqpSettingsFor } from "./settings.js";
