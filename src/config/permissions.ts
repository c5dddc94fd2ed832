// `mq-gateway generate --format nats-server`: the "NATS permissions" of admin-subjects.md as
// nats-server config text. Secrets are never printed: each password is a $VARIABLE that
// nats-server reads from the environment (an "env:NAME" secret keeps its own NAME).
import type { Credentials, GatewayConfig } from "./schema.js";
import { secretReference } from "./secrets.js";

interface Permissions {
  readonly publish: readonly string[];
  readonly subscribe: readonly string[];
  readonly allowResponses: boolean;
}

interface UserBlock {
  readonly comment: readonly string[];
  readonly auth: readonly string[];
  readonly permissions: Permissions;
}

/** Clients get everything but the gateway's own namespace: the gateway refuses MQTT and AMQP clients there, NATS clients only NATS can stop. */
const CLIENT_PERMISSIONS = "MQG_CLIENT_PERMISSIONS";
// Clients may not publish into the inboxes of the gateway's requests on their connections
// (_INBOX.MQGW.<id>): an answer there would be taken for JetStream's (a stored publish's ack).
const ADMIN_ACCOUNT = "MQG_ADMIN";
/** The bans bucket, in the admin account (docs/decisions/bans.md). */
export const BANS_BUCKET = "MQGW_BANS";
// Used when the config names no client account (the single-account, no-auth setup).
const EXAMPLE_ACCOUNT = "CLIENTS";

export function natsServerPermissions(config: GatewayConfig): string {
  const variables: string[] = [];
  const seen = new Set<string>();
  const secret = (value: string | undefined, fallback: string, what: string) => {
    const ref = value === undefined ? undefined : secretReference(value);
    const name = ref?.kind === "env" && /^[A-Za-z_][A-Za-z0-9_]*$/.test(ref.name) ? ref.name : fallback;
    if (!seen.has(name)) variables.push(`#   $${name.padEnd(34)} ${what}`);
    seen.add(name);
    return `$${name}`;
  };
  const serverScope = config.source.id_generated ? "*" : config.id;

  const admin = userBlock(config.admin, "mqg-admin", "MQG_ADMIN", "the gateway's admin user", secret, {
    // $MQG.admin.> too: `mq-gateway ctl --config` sends admin requests as this user (docs/ctl.md).
    publish: ["$SYS.REQ.USER.INFO", "$MQG.admin.>", ...bansBucketApi()],
    subscribe: [`$MQG.admin.server.${serverScope}.>`, "$MQG.admin.ping.>", "$MQG.admin.account.*.>", "_INBOX.>"],
    allowResponses: true,
  });
  const adminComment = [
    "The gateway's admin user: answers the three admin scopes, asks NATS for its account",
    "name ($SYS.REQ.USER.INFO, replies in its inbox) and replies to requests; mq-gateway ctl",
    "--config sends admin requests as this user too. It keeps the bans bucket (JetStream",
    "in this account) and asks the other gateways to kick a client whose session is dropped.",
    ...(config.source.id_generated
      ? ["No id is configured, so it may answer for any server id; set id to pin it."]
      : []),
    ...(config.admin === null ? ["The config has no admin section: without it the gateway serves no admin API."] : []),
    ...admin.comment,
  ];
  const operator: UserBlock = {
    comment: ["An operator: sends admin requests and reads the replies in its inbox."],
    auth: [
      `user: "mqg-operator"`,
      `password: ${secret(undefined, "MQG_OPERATOR_PASSWORD", `password of "mqg-operator", an operator`)}`,
    ],
    permissions: { publish: ["$MQG.admin.>"], subscribe: ["_INBOX.>"], allowResponses: false },
  };

  const accounts = clientAccounts(config);
  const accountBlocks = accounts.map((account) => {
    // A binding without an account belongs to the single-account setup (schema.ts refuses it once accounts are named).
    const streams = config.bindings.filter((b) => b.account === account || b.account === null).map((b) => b.stream);
    // nats-server wants user names unique across all accounts, so the placeholder names the account.
    const gateway = userBlock(
      config.gateway_users[account] ?? null,
      `mqg-${account.toLowerCase()}`,
      `MQG_GATEWAY_${variablePart(account)}`,
      `the gateway user of account ${account}`,
      secret,
      gatewayPermissions(config, [...new Set(streams)]),
    );
    return [
      `  # Client account ${account}${account === EXAMPLE_ACCOUNT && !(account in config.gateway_users) ? " (an example name: the config names no account)" : ""}.`,
      `  ${quote(account)} {`,
      "    jetstream: enabled",
      "    # Users without permissions of their own (the MQTT, AMQP and NATS clients) get these.",
      `    default_permissions: $${CLIENT_PERMISSIONS}`,
      "    users: [",
      ...renderUser(
        {
          ...gateway,
          comment: [
            "The gateway user: liveness asks between gateways ($MQG.alive.*) and their replies,",
            `the sessions bucket ${config.mqtt.sessions_bucket}, retained stream ${config.mqtt.retained_stream}`,
            ...(config.mqtt.messages_stream
              ? [
                  `and MQTT store ${config.mqtt.messages_stream} (QoS 1/2 messages for offline sessions, and their consumers)`,
                ]
              : []),
            "(created on first use; the gateway's writes stay under $MQG.>, which clients cannot reach),",
            "stored delivery on the account's binding streams (a durable consumer per MQTT session and",
            "filter: made, pulled, acknowledged, reset, paused for rebalance, deleted), and the replies to",
            "its own requests under $MQG.inbox.<gateway id>.",
            ...gateway.comment,
          ],
        },
        "      ",
      ),
      "      # The account's client users go here; they get default_permissions, e.g.:",
      `      # { user: "sensor-7", password: "..." }`,
      "      # A user with permissions of its own needs only what it does (docs/accounts.md): publish on",
      "      # its subjects (any QoS), subscribe on what it subscribes to, and subscribe _INBOX.MQGW.> if it",
      "      # publishes QoS 1/2 to a stream's subjects; the gateway learns its account from nats-server:",
      `      # { user: "sensor-8", password: "...", permissions: { publish: ["plant.>"], subscribe: ["plant.>"] } }`,
      "    ]",
      "  }",
    ].join("\n");
  });

  const body = [
    `# Client NATS users: everything except $MQG.>, the gateway's own subjects, and publishing`,
    `# to _INBOX.MQGW.>, where the gateway's requests on client connections get their answers.`,
    `${CLIENT_PERMISSIONS} = {`,
    `  publish: { allow: [">"], deny: ["$MQG.>", "_INBOX.MQGW.>"] }`,
    `  subscribe: { allow: [">"], deny: ["$MQG.>"] }`,
    "}",
    "",
    "accounts {",
    `  # The admin account: the gateway's admin connection and the operators' requests.`,
    `  # Rename it to your admin account.`,
    `  ${quote(ADMIN_ACCOUNT)} {`,
    "    jetstream: enabled",
    "    users: [",
    ...renderUser({ ...admin, comment: adminComment }, "      "),
    ...renderUser(operator, "      "),
    "    ]",
    "  }",
    "",
    accountBlocks.join("\n\n"),
    "}",
    "",
  ].join("\n");

  const header = [
    `# nats-server permissions for mq-gateway ${config.id} (mq-gateway generate --format nats-server).`,
    "# Merge these blocks into the nats-server config. Passwords are variables: set each one",
    '# in nats-server\'s environment (or define it in the config, NAME: "...") before starting it.',
    "# nats-server parses a variable's value: quote one that looks like a number, e.g. '\"1234\"'.",
    ...variables,
    ...duplicateUsers(config).map(
      (user) => `# Note: user "${user}" is in several accounts; nats-server needs user names unique across accounts.`,
    ),
    "",
    "",
  ];
  return header.join("\n") + body;
}

function duplicateUsers(config: GatewayConfig): string[] {
  const users = Object.values(config.gateway_users).flatMap((c) => (c.kind === "user" ? [c.user] : []));
  if (config.admin?.kind === "user") users.push(config.admin.user);
  return [...new Set(users.filter((u, i) => users.indexOf(u) !== i))];
}

/** Every account the config names; the one example account when it names none. */
function clientAccounts(config: GatewayConfig): string[] {
  const named = new Set<string>(Object.keys(config.gateway_users));
  for (const b of config.bindings) if (b.account !== null) named.add(b.account);
  for (const r of config.routing) named.add(r.account);
  return named.size === 0 ? [EXAMPLE_ACCOUNT] : [...named].sort();
}

/**
 * The gateway user of one client account: what the gateway does there with its own user
 * and nothing more (docs/decisions/trust-model.md, "What generate grants").
 */
function gatewayPermissions(config: GatewayConfig, bindingStreams: readonly string[]): Permissions {
  return {
    publish: [
      // Liveness asks to the other gateways, claims of a client id connecting here, and the retained messages it writes.
      "$MQG.alive.*",
      "$MQG.claim.*",
      `${RETAINED_SUBJECTS}`,
      ...ownStreamWrites(config),
      // jetstreamManager() asks for the account's JetStream info first.
      "$JS.API.INFO",
      // Which account a client's connection is in, on a nats-server that does not say it at
      // CONNECT, for a client user that may not ask $SYS.REQ.USER.INFO (docs/decisions/client-account.md).
      "$SYS.REQ.ACCOUNT.PING.CONNZ",
      ...ownStreams(config).flatMap(ownStreamApi),
      ...bindingStreams.flatMap(storedDeliveryApi),
      ...mqttStoreApi(config.mqtt.messages_stream),
    ],
    // Liveness asks for this gateway, and the replies to its own requests ($MQG.inbox.<id>: every
    // gateway that shares this user has its own id, so all of them).
    subscribe: ["$MQG.alive.*", "$MQG.claim.*", "$MQG.inbox.*.>"],
    // Liveness replies, to the asking gateway's inbox.
    allowResponses: true,
  };
}

const RETAINED_SUBJECTS = "$MQG.retained.>";

/** The admin user's part in the bans bucket: made when missing, written, read and watched (bans.ts). */
export function bansBucketApi(): string[] {
  return ["$JS.API.INFO", `$KV.${BANS_BUCKET}.>`, ...ownStreamApi(`KV_${BANS_BUCKET}`)];
}

/** The streams the gateway makes and keeps in each client account (CONTRACT: created on first use). */
function ownStreams(config: GatewayConfig): string[] {
  return [`KV_${config.mqtt.sessions_bucket}`, config.mqtt.retained_stream];
}

/** Subjects the gateway writes into its own streams beside the retained ones: the sessions bucket's keys. */
function ownStreamWrites(config: GatewayConfig): string[] {
  return [`$KV.${config.mqtt.sessions_bucket}.>`];
}

/**
 * Its own streams: made when missing (INFO, CREATE; a bucket from before per-message TTLs
 * is given them: UPDATE), the retained stream purged per subject
 * (an empty retained payload), read by direct get, or message get where a stream has no
 * direct get (sessions, retained), and the bucket
 * watched with ordered consumers (CREATE with the filter, INFO, DELETE, flow control).
 */
function ownStreamApi(stream: string): string[] {
  return [
    `$JS.API.STREAM.INFO.${stream}`,
    `$JS.API.STREAM.CREATE.${stream}`,
    `$JS.API.STREAM.UPDATE.${stream}`,
    `$JS.API.STREAM.PURGE.${stream}`,
    `$JS.API.DIRECT.GET.${stream}`,
    `$JS.API.DIRECT.GET.${stream}.>`,
    // A bucket or stream made without direct get (by an older gateway, or by hand) is read this way.
    `$JS.API.STREAM.MSG.GET.${stream}`,
    `$JS.API.CONSUMER.CREATE.${stream}.>`,
    `$JS.API.CONSUMER.INFO.${stream}.*`,
    `$JS.API.CONSUMER.DELETE.${stream}.*`,
    `$JS.FC.${stream}.>`,
  ];
}

/**
 * A binding's stream: its subjects read at start (STREAM.INFO); a durable consumer per MQTT
 * session and filter, made, looked at, taken over by each resume (UNPIN and RESET:
 * docs/decisions/consumer-takeover.md) and deleted with the session; pulled (MSG.NEXT) and
 * acknowledged; paused for rebalance. JetStream permissions cannot name a consumer prefix,
 * so these cover every consumer of the stream.
 */
function storedDeliveryApi(stream: string): string[] {
  return [
    `$JS.API.STREAM.INFO.${stream}`,
    `$JS.API.CONSUMER.DURABLE.CREATE.${stream}.*`,
    `$JS.API.CONSUMER.CREATE.${stream}.>`,
    `$JS.API.CONSUMER.INFO.${stream}.*`,
    `$JS.API.CONSUMER.DELETE.${stream}.*`,
    `$JS.API.CONSUMER.MSG.NEXT.${stream}.*`,
    `$JS.API.CONSUMER.UNPIN.${stream}.*`,
    `$JS.API.CONSUMER.RESET.${stream}.*`,
    `$JS.API.CONSUMER.PAUSE.${stream}.*`,
    `$JS.ACK.${stream}.>`,
  ];
}

/**
 * The MQTT store (docs/decisions/mqtt-store.md): the gateway user makes the stream, writes
 * `$MQG.msgs.<subject>`, and runs the sessions' durable pull consumers on it, as on a binding.
 */
function mqttStoreApi(stream: string): string[] {
  if (stream === "") return [];
  return [
    "$MQG.msgs.>",
    `$JS.API.STREAM.CREATE.${stream}`,
    `$JS.API.STREAM.UPDATE.${stream}`,
    ...storedDeliveryApi(stream).filter((s) => !s.startsWith("$JS.API.CONSUMER.PAUSE.")),
  ];
}

type SecretFn = (value: string | undefined, fallback: string, what: string) => string;

/** The user entry for credentials from the config, or a placeholder user when the config has none. */
function userBlock(
  credentials: Credentials | null,
  defaultUser: string,
  variable: string,
  what: string,
  secret: SecretFn,
  permissions: Permissions,
): UserBlock {
  switch (credentials?.kind) {
    case "nkey":
      return {
        comment: [`Its nkey is the public key (U...) of the seed in ${credentials.nkey_seed_file}.`],
        auth: [`nkey: ${secret(undefined, `${variable}_NKEY`, `public nkey of ${what}`)}`],
        permissions,
      };
    case "creds":
      return {
        comment: [
          `It logs in with ${credentials.creds_file} (operator / JWT mode), where permissions live in the user JWT, e.g.:`,
          `nsc edit user --name <user> ${nscFlags(permissions)}`,
        ],
        auth: [
          `user: ${quote(defaultUser)}`,
          `password: ${secret(undefined, `${variable}_PASSWORD`, `password of "${defaultUser}", ${what}`)}`,
        ],
        permissions,
      };
    case "token":
      return {
        comment: ["The config gives it a token; a user inside accounts needs a user and password (or an nkey)."],
        auth: [
          `user: ${quote(defaultUser)}`,
          `password: ${secret(undefined, `${variable}_PASSWORD`, `password of "${defaultUser}", ${what}`)}`,
        ],
        permissions,
      };
    case "user":
      return {
        comment: [],
        auth: [
          `user: ${quote(credentials.user)}`,
          `password: ${secret(credentials.password, `${variable}_PASSWORD`, `password of "${credentials.user}", ${what}`)}`,
        ],
        permissions,
      };
    default:
      return {
        comment: [],
        auth: [
          `user: ${quote(defaultUser)}`,
          `password: ${secret(undefined, `${variable}_PASSWORD`, `password of "${defaultUser}", ${what}`)}`,
        ],
        permissions,
      };
  }
}

function renderUser(user: UserBlock, indent: string): string[] {
  const p = user.permissions;
  return [
    ...user.comment.map((line) => `${indent}# ${line}`),
    `${indent}{`,
    ...user.auth.map((line) => `${indent}  ${line}`),
    `${indent}  permissions: {`,
    ...allowList("publish", p.publish, `${indent}    `),
    ...allowList("subscribe", p.subscribe, `${indent}    `),
    ...(p.allowResponses ? [`${indent}    allow_responses: true`] : []),
    `${indent}  }`,
    `${indent}}`,
  ];
}

// Short lists on one line; long ones one subject a line, so a reader can scan and edit them.
function allowList(direction: "publish" | "subscribe", subjects: readonly string[], indent: string): string[] {
  if (subjects.length <= 4) return [`${indent}${direction}: { allow: ${list(subjects)} }`];
  return [
    `${indent}${direction}: {`,
    `${indent}  allow: [`,
    ...subjects.map((s) => `${indent}    ${quote(s)}`),
    `${indent}  ]`,
    `${indent}}`,
  ];
}

function nscFlags(p: Permissions): string {
  return [
    `--allow-pub "${p.publish.join(",")}"`,
    `--allow-sub "${p.subscribe.join(",")}"`,
    ...(p.allowResponses ? ["--allow-pub-response"] : []),
  ].join(" ");
}

// Quoted, always: an unquoted $MQG.> would be read as a variable reference.
const quote = (value: string) => JSON.stringify(value);
const list = (values: readonly string[]) => `[${values.map(quote).join(", ")}]`;
const variablePart = (account: string) => account.toUpperCase().replace(/[^A-Z0-9_]/g, "_");
