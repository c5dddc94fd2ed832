// The start-up warning for an open door: with the embedded nats-server nobody is
// authenticated, so a client listener reachable from other machines lets anyone there
// publish and subscribe to everything. Loopback is the default (embeddedDefaults.ts); an
// operator may open it on purpose, and then hears about it at every start.
import type { HostPort } from "../actors/listeners.js";
import type { GatewayConfig } from "../config/schema.js";

/** The listeners that give a client NATS access, by the names the gateway logs them under. */
export function exposedListeners(config: GatewayConfig): string[] {
  if (config.nats.servers.length > 0) return [];
  const candidates: Array<[string, HostPort | null | undefined]> = [
    ["mqtt", config.mqtt.listen],
    ["mqtt_tls", config.mqtt.tls?.listen],
    ["mqtt_ws", config.mqtt.websocket],
    ["amqp", config.amqp.listen],
    ["amqp_tls", config.amqp.tls?.listen],
    ["nats", config.nats.embedded_listen],
  ];
  return candidates.flatMap(([name, at]) => (at && !isLoopback(at.host) ? [`${name} ${at.host}:${at.port}`] : []));
}

export const EXPOSED_WARNING =
  "listeners reachable from other machines while NATS has no authentication (the embedded nats-server): " +
  "anyone who reaches them can publish and subscribe to every subject. Keep them on 127.0.0.1, " +
  "or set nats.servers to a NATS that authenticates clients";

export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
