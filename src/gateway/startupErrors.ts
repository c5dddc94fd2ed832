// Why the gateway could not start, as one plain line an operator can act on: which port,
// which config key and which flag move it. Effect's Cause is for the code; a person
// reads the sentence (CONTRACT: exit 2 "could not bind a listener or reach anything it
// must reach at start").
import { AuthorizationError, UserAuthenticationExpiredError } from "@nats-io/transport-node";
import { Cause, Data } from "effect";
import type { NatsServerRefused } from "../actors/embeddedNats.js";
import { describeCredentials } from "../actors/gatewayCredentials.js";
import type { HostPort } from "../actors/listeners.js";
import type { Credentials } from "../config/schema.js";

/** A failure at start whose message is already the sentence to show: the operator's to fix, not a bug. */
export class StartupError extends Data.TaggedError("StartupError")<{ readonly message: string }> {}

const startupError = (message: string) => new StartupError({ message });

/** Where each listener of the gateway is configured, for "move it with ...". */
export const LISTENERS = {
  nats: { what: "the embedded nats-server", key: "nats.embedded_listen", flag: "--nats-listen" },
  mqtt: { what: "MQTT", key: "mqtt.listen", flag: "--mqtt" },
  mqtt_tls: { what: "MQTT over TLS", key: "mqtt.tls.listen" },
  mqtt_ws: { what: "MQTT over WebSocket", key: "mqtt.websocket" },
  amqp: { what: "AMQP", key: "amqp.listen", flag: "--amqp" },
  amqp_tls: { what: "AMQP over TLS", key: "amqp.tls.listen" },
  http: { what: "HTTP", key: "http.listen", flag: "--http" },
} as const satisfies Record<string, { what: string; key: string; flag?: string }>;

export type ListenerName = keyof typeof LISTENERS;

const address = (at: HostPort) => `${at.host.includes(":") ? `[${at.host}]` : at.host}:${at.port}`;

function moveIt(name: ListenerName): string {
  const l: { key: string; flag?: string } = LISTENERS[name];
  return l.flag ? `move it with ${l.key} or ${l.flag}` : `move it with ${l.key}`;
}

/** A listener that could not bind, from the socket error's code. */
export function listenFailure(
  name: ListenerName,
  at: HostPort,
  error: { code?: string | undefined; message: string },
): StartupError {
  const { what } = LISTENERS[name];
  switch (error.code) {
    case "EADDRINUSE":
      return startupError(
        `port ${at.port} (${what}, ${address(at)}) is in use: ${moveIt(name)}, or stop what holds it`,
      );
    case "EACCES":
      return startupError(
        `cannot listen for ${what} on ${address(at)}: permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE): ${moveIt(name)}`,
      );
    case "EADDRNOTAVAIL":
      return startupError(
        `cannot listen for ${what} on ${address(at)}: ${at.host} is not an address of this machine: ${moveIt(name)}`,
      );
    default:
      return startupError(`cannot listen for ${what} on ${address(at)}: ${error.message}: ${moveIt(name)}`);
  }
}

/** The embedded nats-server refused to start; nats-server's own last line says why. */
export function embeddedNatsFailure(at: HostPort, error: Error | NatsServerRefused): StartupError {
  if ("_tag" in error && error._tag === "NatsServerRefused" && error.portInUse) {
    return startupError(
      `port ${at.port} (${LISTENERS.nats.what}, ${address(at)}) is in use, perhaps by another nats-server: ${moveIt("nats")}, or use that server with --nats nats://${address(at)}`,
    );
  }
  return startupError(`the embedded nats-server could not start: ${error.message}`);
}

export function noNatsServer(): StartupError {
  return startupError(
    "no nats-server found (looked at $NATS_SERVER_BIN, the package's .tools/ and PATH): install nats-server 2.10 or newer " +
      "(e.g. apt-get install nats-server, or a release from github.com/nats-io/nats-server), set NATS_SERVER_BIN=/path/to/nats-server, " +
      "or use a running NATS with --nats nats://HOST:4222",
  );
}

/** Who the gateway's own connection presented to NATS, for a refusal: never a secret. */
export interface PresentedUser {
  /** The gateway_users key it came from. */
  readonly account: string;
  readonly credentials: Credentials;
}

export function natsUnreachable(
  servers: readonly string[],
  error: unknown,
  embedded: boolean,
  presented?: PresentedUser,
): StartupError {
  const why = plainMessage(error);
  if (isAuthRefusal(error)) return natsRefused(servers, why, presented);
  const hint = embedded
    ? ""
    : " (is nats-server running there? set nats.servers or --nats, or leave them out to run the embedded nats-server)";
  return startupError(`cannot reach NATS at ${servers.join(", ")}: ${why}${hint}`);
}

/** NATS answered, and refused the credentials: the server is there, the user is what to look at. */
function natsRefused(servers: readonly string[], why: string, presented: PresentedUser | undefined): StartupError {
  const at = servers.join(", ");
  if (!presented) {
    return startupError(
      `NATS at ${at} refused a connection without credentials (${why}): it requires a user; set gateway_users ` +
        "(the gateway's user in each client account, docs/accounts.md)",
    );
  }
  const key = `gateway_users.${presented.account}`;
  return startupError(
    `NATS at ${at} refused the credentials of ${key} (${describeCredentials(presented.credentials)}): ${why}; ` +
      `check ${key} against the users nats-server knows`,
  );
}

function isAuthRefusal(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    // nats.js names a refusal (violation, timeout, expiry); the bridge marks its own connect failures.
    if (e instanceof AuthorizationError || e instanceof UserAuthenticationExpiredError) return true;
    if ((e as { auth?: unknown }).auth === true) return true;
  }
  return false;
}

/**
 * The sentence for a start that failed. A StartupError is the operator's to fix; anything
 * else is a bug, said in one line too (its message), with `bug` set so the caller can
 * log the whole cause for a report.
 */
export function startFailure(cause: Cause.Cause<unknown>): { line: string; bug: boolean } {
  const error = Cause.squash(cause);
  if (error instanceof StartupError) return { line: error.message, bug: false };
  return { line: `could not start: ${plainMessage(error)}`, bug: true };
}

/** An error's own message, on one line, whatever was thrown. */
export function plainMessage(error: unknown): string {
  const text =
    error instanceof Error
      ? error.message
      : typeof error === "string"
        ? error
        : (JSON.stringify(error) ?? String(error));
  return text.replace(/\s*\n\s*/g, " ").trim() || "unknown error";
}
