// The gateway's configuration as a service: the one every layer reads. A reload (SIGHUP)
// replaces it; whatever reads it per connection, request or publish sees the new one.
import { Context, Layer } from "effect";
import type { GatewayConfig } from "../../config/schema.js";
import type { Logger } from "../../log.js";
import type { WorkerRole } from "../workerChannel.js";

export class Settings extends Context.Service<
  Settings,
  {
    /** The configuration in force now (the last reload's). */
    readonly config: () => GatewayConfig;
    /** What the process started with: what a reload cannot change (id, listeners, NATS servers). */
    readonly initial: GatewayConfig;
    readonly replace: (next: GatewayConfig) => void;
    readonly log: Logger;
    /** Set when this gateway is a worker of `run --workers`. */
    readonly role: WorkerRole | undefined;
  }
>()("mq-gateway/Settings") {
  static readonly layer = (initial: GatewayConfig, log: Logger, role: WorkerRole | undefined) =>
    Layer.sync(Settings, () => {
      let config = initial;
      return {
        config: () => config,
        initial,
        replace: (next) => {
          config = next;
        },
        log,
        role,
      };
    });
}
