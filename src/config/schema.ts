// The config file of CONTRACT.md ("Config file"), key for key, and the normalized
// GatewayConfig the rest of the gateway reads. Strict objects everywhere: a misspelt key
// is refused, never silently ignored. Checks that span several fields run even when a
// sibling is wrong (`when: always`), so `check` lists every problem at once.
import * as z from "zod";
import { clientTls, credentials, serverTls } from "./connectionSchemas.js";
import { type PublishQuota, publishQuota } from "./quotas.js";
import { type TracingConfig, tracing } from "./tracingSchema.js";
import type { ListenAddress } from "./units.js";
import {
  always,
  between,
  bucketName,
  count,
  duration,
  listen,
  literalSubject,
  nonEmpty,
  seconds,
  size,
  streamName,
  template,
  token,
} from "./values.js";

export { templateProblem } from "./values.js";

export type { ListenAddress };

export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const SASL_MECHANISMS = ["PLAIN", "ANONYMOUS", "EXTERNAL"] as const;
export type SaslMechanism = (typeof SASL_MECHANISMS)[number];

/** How the gateway authenticates one of its own NATS connections (admin, or a gateway user). */
export type Credentials =
  | { readonly kind: "user"; readonly user: string; readonly password: string }
  | { readonly kind: "token"; readonly token: string }
  | { readonly kind: "creds"; readonly creds_file: string }
  | { readonly kind: "nkey"; readonly nkey_seed_file: string };

export interface ClientTls {
  readonly ca_file?: string;
  readonly cert_file?: string;
  readonly key_file?: string;
}

export interface ServerTls {
  readonly listen: ListenAddress;
  readonly cert_file: string;
  readonly key_file: string;
  readonly ca_file?: string;
  /** Ask for and verify client certificates (against ca_file when given). */
  readonly verify_clients: boolean;
}

export interface Route {
  /** The subject clients send to, e.g. "orders". */
  readonly subject: string;
  /** The subject it becomes, with {name} filled from a property, e.g. "orders.{region}". */
  readonly template: string;
}

export interface Binding {
  readonly stream: string;
  /** null: the one account of a single-account (no auth) setup. */
  readonly account: string | null;
}

export interface RoutingRule {
  /** A NATS username, `*` matching any run of characters. */
  readonly username: string;
  readonly account: string;
}

/** What loadConfig was given, so a reload (SIGHUP) can read the same file with the same flags. */
export interface ConfigSource {
  readonly file: string | null;
  readonly flags: ConfigFlags;
  /** True when `id` was not configured and was drawn at load: log it at start. */
  readonly id_generated: boolean;
}

/** The command-line flags that override the file (CONTRACT "Processes and commands"). */
export interface ConfigFlags {
  readonly id?: string;
  /** One URL or several, comma-separated; "" = the embedded nats-server. */
  readonly nats?: string;
  /** nats.embedded_listen: where the embedded nats-server listens. An addition. */
  readonly natsListen?: string;
  readonly mqtt?: string;
  readonly amqp?: string;
  readonly http?: string;
  readonly data?: string;
  readonly logLevel?: string;
  /** log.format: json or pretty. An addition. */
  readonly logFormat?: string;
}

/**
 * The parsed config. Durations are milliseconds, sizes bytes, listen addresses
 * {host, port} or null when "" turned the listener off. Secrets (password, token) are
 * still the strings of the file, "file:/path" and "env:NAME" included: resolve them
 * with resolveSecret (secrets.ts) when connecting.
 */
export interface GatewayConfig {
  readonly id: string;
  /** Absolute; the embedded nats-server keeps its JetStream store here. From --data, not the file. */
  readonly data: string;
  readonly nats: {
    /** Empty: start the embedded nats-server. */
    readonly servers: readonly string[];
    /** Where the embedded nats-server listens for clients (used only when servers is empty). An addition to the CONTRACT. */
    readonly embedded_listen: ListenAddress;
    /** Bytes; the embedded nats-server's max_payload (used only when servers is empty). An addition to the CONTRACT. */
    readonly embedded_max_payload: number;
    readonly tls: ClientTls | null;
    /**
     * nats-server's max_control_line, in bytes: subjects and client ids whose protocol
     * lines would not fit are refused before they reach NATS (docs/decisions/trust-model.md). An addition.
     */
    readonly max_control_line: number;
  };
  /** null: no admin connection, no admin API. */
  readonly admin: Credentials | null;
  /** The gateway's own user in each client account, by account name. */
  readonly gateway_users: Readonly<Record<string, Credentials>>;
  readonly mqtt: {
    readonly listen: ListenAddress | null;
    readonly websocket: ListenAddress | null;
    readonly tls: ServerTls | null;
    readonly routes: readonly Route[];
    readonly sessions_bucket: string;
    readonly retained_stream: string;
    /** The MQTT store: stream of QoS 1/2 messages kept for persistent sessions, "" for none (docs/decisions/mqtt-store.md). Additions. */
    readonly messages_stream: string;
    /** Bytes the MQTT store may hold; -1 = no limit of its own (the account's JetStream limits). */
    readonly messages_max_bytes: number;
    /** ms a message may wait in the MQTT store; 0 = no limit (the sessions' expiry bounds it). */
    readonly messages_max_age: number;
    /** Replicas of the gateway's streams and buckets; null = the cluster's size up to 3. An addition. */
    readonly stream_replicas: number | null;
    readonly max_packet_size: number;
    readonly receive_maximum: number;
    readonly max_keepalive: number;
    readonly session_expiry_max: number;
    /** How often one gateway looks through the sessions bucket for records a gone gateway left; 0 = never. An addition. */
    readonly session_sweep_interval: number;
    /** "always" (the spec's header table) or "when_needed" (plain PUB for bare QoS 0; docs/performance.md). An addition. */
    readonly client_id_header: "always" | "when_needed";
    /** What MQTT clients may use, told in the MQTT 5 CONNACK (docs/decisions/mqtt-capabilities.md). Additions. */
    readonly maximum_qos: 0 | 1 | 2;
    readonly retain_available: boolean;
    readonly wildcard_subscription_available: boolean;
    readonly shared_subscription_available: boolean;
  };
  readonly amqp: {
    readonly listen: ListenAddress | null;
    readonly tls: ServerTls | null;
    readonly routes: readonly Route[];
    readonly max_frame_size: number;
    readonly sasl: readonly SaslMechanism[];
    /** ms; advertised in the open, a connection silent this long is closed. An addition. */
    readonly idle_timeout: number;
    /** Unsettled messages with the same container and message-id within the stream's duplicate window are stored once. An addition. */
    readonly dedupe_message_id: boolean;
  };
  readonly bindings: readonly Binding[];
  readonly routing: readonly RoutingRule[];
  readonly ldm: { readonly duration: number };
  readonly http: { readonly listen: ListenAddress | null };
  readonly log: { readonly level: LogLevel; readonly format: "json" | "pretty" };
  readonly limits: {
    /** 0 = no limit. */
    readonly max_connections: number;
    /** 0 = no limit. */
    readonly max_connections_per_account: number;
    /** MQTT subscriptions (filters) and AMQP receiving links of one client; 0 = no limit. */
    readonly max_subscriptions_per_client: number;
    /** Levels of an MQTT topic or filter, tokens of an AMQP address; 0 = no limit. */
    readonly max_topic_levels: number;
    /** From accept to MQTT CONNECT / AMQP open, in milliseconds. */
    readonly connect_timeout: number;
    /** Bytes all MQTT sockets together may hold before their CONNECT is complete. An addition. */
    readonly max_connect_buffer: number;
    /** Bytes the gateway holds for one MQTT client on their way out (socket, backlog). An addition. */
    readonly max_client_buffer: number;
    /** How long a client may stay at max_client_buffer while its socket takes nothing, in milliseconds. An addition. */
    readonly write_deadline: number;
    /** Publish quotas of one client (connection) and of one account, on this gateway process (docs/decisions/quotas.md). Additions. */
    readonly per_client: PublishQuota;
    readonly per_account: PublishQuota;
  };
  /** W3C trace context and OTLP spans (docs/decisions/trace-context.md). An addition. */
  readonly tracing: TracingConfig;
  readonly source: ConfigSource;
}

/** The part of GatewayConfig that the file gives; load.ts adds id (when drawn), data and source. */
export type FileConfig = Omit<GatewayConfig, "id" | "data" | "source"> & { readonly id?: string | undefined };

// --- sections ------------------------------------------------------------------------------

// YAML reads "mqtt:" with nothing under it as null; an empty section means "all defaults".
function section<T extends z.ZodType>(schema: T) {
  return z.preprocess((v) => (v === null ? undefined : v), schema);
}

const routes = (protocol: string) =>
  z
    .array(z.strictObject({ subject: literalSubject, template }))
    .default([])
    .superRefine((list, ctx) => {
      const first = new Map<string, number>();
      list.forEach((route, i) => {
        const subject = (route as { subject?: unknown } | null)?.subject;
        if (typeof subject !== "string") return;
        const earlier = first.get(subject);
        if (earlier === undefined) first.set(subject, i);
        else
          ctx.addIssue({
            code: "custom",
            path: [i, "subject"],
            message: `duplicate route subject "${subject}" (also ${protocol}.routes[${earlier}])`,
            input: subject,
          });
      });
    }, always);

const mqtt = z.strictObject({
  listen: listen.prefault("0.0.0.0:1883"),
  websocket: listen.optional().transform((l) => l ?? null),
  tls: section(serverTls("0.0.0.0:8883").optional()).transform((t) => t ?? null),
  routes: routes("mqtt"),
  sessions_bucket: bucketName.default("MQGW_SESSIONS"),
  retained_stream: streamName.default("MQGW_RETAINED"),
  // "" turns the MQTT store off: QoS 1/2 to unbound subjects is then live only, as before it.
  messages_stream: z.union([z.literal(""), streamName]).default("MQGW_MSGS"),
  messages_max_bytes: size
    .optional()
    .transform((n) => n ?? -1)
    .pipe(z.number().refine((n) => n === -1 || n >= 1, "must be at least 1 byte; leave it out for no limit")),
  // JetStream refuses a max_age under 100ms; 0 is no limit.
  messages_max_age: duration
    .prefault("0")
    .pipe(z.number().refine((ms) => ms === 0 || ms >= 1000, "must be 0 (no limit) or at least 1s")),
  // nats-server's own MQTT `stream_replicas`; JetStream allows at most 5.
  stream_replicas: count(5)
    .min(1, "must be between 1 and 5")
    .optional()
    .transform((n) => n ?? null),
  // MQTT's own ceiling: a Remaining Length of at most 268,435,455 bytes.
  max_packet_size: size
    .prefault("1MiB")
    .pipe(
      z.number().min(1, "must be at least 1 byte").max(268_435_455, "must be at most 268435455 bytes (MQTT's limit)"),
    ),
  receive_maximum: count(65_535).min(1, "must be at least 1").default(256),
  // MQTT carries keep alive as 16-bit seconds.
  max_keepalive: duration.prefault("120s").pipe(
    z
      .number()
      .refine((ms) => ms % 1000 === 0, "must be whole seconds")
      .refine((ms) => ms >= 1000 && ms <= 65_535_000, "must be between 1s and 65535s"),
  ),
  // MQTT carries the session expiry as 32-bit seconds.
  session_expiry_max: duration.prefault("7d").pipe(between(0, 4_294_967_295_000, seconds)),
  session_sweep_interval: duration.prefault("5m").pipe(between(0, 7 * 24 * 3_600_000, seconds)),
  client_id_header: z.enum(["always", "when_needed"]).default("always"),
  maximum_qos: z.union([z.literal(0), z.literal(1), z.literal(2)]).default(2),
  retain_available: z.boolean().default(true),
  wildcard_subscription_available: z.boolean().default(true),
  shared_subscription_available: z.boolean().default(true),
});

const amqp = z
  .strictObject({
    listen: listen.prefault("0.0.0.0:5672"),
    tls: section(serverTls("0.0.0.0:5671").optional()).transform((t) => t ?? null),
    routes: routes("amqp"),
    // AMQP 1.0: max-frame-size is a uint and no peer may ask for less than 512.
    max_frame_size: size.prefault("64KiB").pipe(between(512, 4_294_967_295)),
    sasl: z
      .array(z.enum(SASL_MECHANISMS))
      .min(1, "must offer at least one mechanism")
      .refine((list) => new Set(list).size === list.length, "lists a mechanism twice")
      .default(["PLAIN", "ANONYMOUS"]),
    // AMQP carries it as a uint of milliseconds.
    idle_timeout: duration.prefault("60s").pipe(between(1000, 4_294_967_295, seconds)),
    dedupe_message_id: z.boolean().default(false),
  })
  .superRefine(externalNeedsVerifiedTls, always);

/** EXTERNAL (docs/decisions/amqp-sasl-external.md) is never offered without a listener that verifies certificates. */
function externalNeedsVerifiedTls(a: unknown, ctx: z.RefinementCtx) {
  const { sasl, tls } = (a ?? {}) as { sasl?: unknown; tls?: unknown };
  if (!Array.isArray(sasl) || !sasl.includes("EXTERNAL")) return;
  if ((tls as { verify_clients?: unknown } | null | undefined)?.verify_clients === true) return;
  ctx.addIssue({
    code: "custom",
    path: ["sasl"],
    message: "EXTERNAL needs amqp.tls with verify_clients: true (it is the verified client certificate)",
    input: sasl,
  });
}

const bindings = z
  .array(z.strictObject({ stream: streamName, account: token.optional().transform((a) => a ?? null) }))
  .default([])
  .superRefine((list, ctx) => {
    const seen = new Map<string, number>();
    list.forEach((b, i) => {
      const binding = b as { stream?: unknown; account?: unknown } | null;
      if (typeof binding?.stream !== "string") return;
      const key = `${binding.stream}\u0000${typeof binding.account === "string" ? binding.account : ""}`;
      const earlier = seen.get(key);
      if (earlier === undefined) seen.set(key, i);
      else
        ctx.addIssue({
          code: "custom",
          path: [i, "stream"],
          message: `stream ${binding.stream} is bound twice (also bindings[${earlier}])`,
          input: b,
        });
    });
  }, always);

const LISTENERS = [
  ["nats", "embedded_listen"],
  ["mqtt", "listen"],
  ["mqtt", "websocket"],
  ["mqtt", "tls", "listen"],
  ["amqp", "listen"],
  ["amqp", "tls", "listen"],
  ["http", "listen"],
] as const;

/** Two listeners on one port cannot both bind; say so now rather than exit 2 at start. */
function distinctListeners(config: unknown, ctx: z.RefinementCtx) {
  const taken: { path: readonly string[]; at: ListenAddress }[] = [];
  const servers = (config as { nats?: { servers?: unknown } } | null)?.nats?.servers;
  for (const path of LISTENERS) {
    // With servers configured the embedded nats-server does not start, so its address binds nothing.
    if (path[0] === "nats" && !(Array.isArray(servers) && servers.length === 0)) continue;
    const at = path.reduce<unknown>(
      (node, key) => (node !== null && typeof node === "object" ? (node as Record<string, unknown>)[key] : undefined),
      config,
    );
    if (!isListen(at) || at.port === 0) continue;
    const clash = taken.find(
      (t) => t.at.port === at.port && (t.at.host === at.host || isWildcard(t.at.host) || isWildcard(at.host)),
    );
    if (clash)
      ctx.addIssue({
        code: "custom",
        path: [...path],
        message: `port ${at.port} is also ${clash.path.join(".")}`,
        input: at,
      });
    else taken.push({ path, at });
  }
}

const isWildcard = (host: string) => host === "0.0.0.0" || host === "::";
function isListen(value: unknown): value is ListenAddress {
  return (
    value !== null &&
    typeof value === "object" &&
    typeof (value as ListenAddress).port === "number" &&
    typeof (value as ListenAddress).host === "string"
  );
}

/** The file, as written: strict at every level, defaults as in the CONTRACT. */
export const configFileSchema = z
  .strictObject({
    id: token.optional(),
    nats: section(
      z
        .strictObject({
          // One server may be written without the list.
          servers: z
            .preprocess(
              (v) => (typeof v === "string" ? [v] : v),
              z.array(z.string().refine(isNatsUrl, "is not a NATS URL (e.g. nats://host:4222)")),
            )
            .default([]),
          tls: section(clientTls.optional()).transform((t) => t ?? null),
          embedded_listen: listen
            .prefault("127.0.0.1:4222")
            .refine((l) => l !== null, "the embedded nats-server needs an address")
            .transform((l) => l as ListenAddress),
          // nats-server takes at most its max_pending (64 MiB) and warns past 8 MB.
          embedded_max_payload: size
            .prefault("8MiB")
            .pipe(
              between(1024, 64 * 1024 * 1024, (n) => (n >= 1024 * 1024 ? `${n / 1024 / 1024}MiB` : `${n / 1024}KiB`)),
            ),
          // nats-server's max_control_line (its default): the longest protocol line it reads.
          max_control_line: size.prefault("4KiB").pipe(
            z
              .number()
              .min(1024, "must be at least 1KiB")
              .max(64 * 1024 * 1024, "must be at most 64MiB"),
          ),
        })
        .prefault({}),
    ),
    admin: section(credentials.optional()).transform((c) => c ?? null),
    gateway_users: section(z.record(token, credentials).default({})),
    mqtt: section(mqtt.prefault({})),
    amqp: section(amqp.prefault({})),
    bindings: section(bindings),
    routing: section(z.array(z.strictObject({ username: nonEmpty, account: token })).default([])),
    ldm: section(z.strictObject({ duration: duration.prefault("30s") }).prefault({})),
    http: section(z.strictObject({ listen: listen.prefault("127.0.0.1:8080") }).prefault({})),
    log: section(
      z
        .strictObject({ level: z.enum(LOG_LEVELS).default("info"), format: z.enum(["json", "pretty"]).default("json") })
        .prefault({}),
    ),
    limits: section(
      z
        .strictObject({
          max_connections: count().default(100_000),
          max_connections_per_account: count().default(0),
          max_subscriptions_per_client: count().default(1_000),
          max_topic_levels: count().default(128),
          connect_timeout: duration.prefault("10s").pipe(z.number().min(1, "must be more than 0s")),
          max_connect_buffer: size.prefault("16MiB").pipe(z.number().min(1, "must be more than 0")),
          max_client_buffer: size.prefault("4MiB").pipe(z.number().min(1, "must be more than 0")),
          write_deadline: duration.prefault("10s").pipe(z.number().min(1, "must be more than 0s")),
          per_client: publishQuota,
          per_account: publishQuota,
        })
        .prefault({}),
    ),
    tracing: section(tracing),
  })
  .superRefine(distinctListeners, always)
  .superRefine(bindingAccounts, always);

/** Once the config names accounts, a binding without one could be any of them. */
function bindingAccounts(config: unknown, ctx: z.RefinementCtx) {
  const { gateway_users: users, bindings: list } = (config ?? {}) as { gateway_users?: unknown; bindings?: unknown };
  if (users === null || typeof users !== "object" || Object.keys(users).length === 0 || !Array.isArray(list)) return;
  list.forEach((b, i) => {
    if (b !== null && typeof b === "object" && (b as { account?: unknown }).account == null) {
      ctx.addIssue({
        code: "custom",
        path: ["bindings", i, "account"],
        message: "is required once gateway_users names accounts",
        input: b,
      });
    }
  });
}

// A compile-time check that the schema yields exactly the FileConfig the rest of the gateway reads.
type Parsed = z.output<typeof configFileSchema>;
const _fileConfigMatches = (p: Parsed): FileConfig => p;
void _fileConfigMatches;

function isNatsUrl(value: string): boolean {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `nats://${value}`;
  try {
    const url = new URL(withScheme);
    return ["nats:", "tls:", "ws:", "wss:"].includes(url.protocol) && url.hostname !== "";
  } catch {
    return false;
  }
}
