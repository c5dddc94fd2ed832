// The embedded nats-server's accounts (docs/decisions/embedded-nats.md): clients in one
// account, CLIENTS, that authenticates nobody (its only user is the no-auth user); the
// admin API in its own account, MQG_ADMIN, whose one user has a password kept in the data
// directory, readable by the gateway's own OS user only. `mq-gateway ctl` reads that file
// when it has no --config, the way rabbitmqctl reads the node's Erlang cookie.
import { randomBytes } from "node:crypto";
import { chmod, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parse } from "yaml";
import { bansBucketApi } from "../config/permissions.js";
import type { Credentials, GatewayConfig } from "../config/schema.js";
import { resolveSecret } from "../config/secrets.js";

export const EMBEDDED_CLIENT_ACCOUNT = "CLIENTS";
export const EMBEDDED_ADMIN_ACCOUNT = "MQG_ADMIN";
export const EMBEDDED_ADMIN_USER = "mqg-admin";
const NO_AUTH_USER = "mqg-anonymous";
/** In the data directory: a gateway config fragment (nats.servers and admin) for ctl. */
export const ADMIN_FILE = "admin.yaml";

/** What a config asks of the embedded nats-server that it cannot give; [] when it fits. */
export function embeddedProblems(config: GatewayConfig): string[] {
  if (config.nats.servers.length > 0) return [];
  const problems: string[] = [];
  if (Object.keys(config.gateway_users).length > 0)
    problems.push(
      `gateway_users: the embedded nats-server has one client account (${EMBEDDED_CLIENT_ACCOUNT}) and no users; name your NATS in nats.servers to use accounts`,
    );
  if (config.admin && config.admin.kind !== "user")
    problems.push(
      "admin: the embedded nats-server takes an admin user with user and password only; leave admin out and the gateway makes one",
    );
  return problems;
}

export interface EmbeddedAdmin {
  /** The admin connection's credentials, as startAdmin takes them. */
  readonly credentials: Credentials;
  /** The password itself, for the nats-server config. */
  readonly password: string;
}

/**
 * The admin user of the embedded server: the config's own `admin` (user and password),
 * else the one kept in the data directory, made on the first start.
 */
export async function embeddedAdmin(config: GatewayConfig): Promise<EmbeddedAdmin> {
  if (config.admin?.kind === "user") {
    const resolved = await resolveSecret(config.admin.password);
    if (!resolved.ok) throw new Error(`admin.password: ${resolved.error}`);
    return { credentials: config.admin, password: resolved.value };
  }
  const kept = await readKeptPassword(join(config.data, ADMIN_FILE));
  const password = kept ?? randomBytes(24).toString("base64url");
  return { credentials: { kind: "user", user: EMBEDDED_ADMIN_USER, password }, password };
}

async function readKeptPassword(file: string): Promise<string | undefined> {
  try {
    const tree = parse(await readFile(file, "utf8")) as { admin?: { user?: unknown; password?: unknown } } | null;
    const { user, password } = tree?.admin ?? {};
    // Only a password made here: a config's "file:"/"env:" reference is not a password.
    const made = typeof password === "string" && password.length >= 16 && !/^(file|env):/.test(password);
    return user === EMBEDDED_ADMIN_USER && made ? password : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Writes `<data>/admin.yaml` (mode 0600): where the embedded server listens and the admin
 * user, as written in the config (a "file:" or "env:" reference stays a reference).
 */
export async function writeAdminFile(dataDir: string, url: string, credentials: Credentials): Promise<string> {
  if (credentials.kind !== "user") throw new Error("the embedded admin user has a user and a password");
  const file = join(dataDir, ADMIN_FILE);
  const text = [
    "# Written by mq-gateway at each start of its embedded nats-server: the admin user's",
    "# local credential. `mq-gateway ctl` reads it when run without --config. Keep it private.",
    `nats: { servers: [${JSON.stringify(url)}] }`,
    `admin: { user: ${JSON.stringify(credentials.user)}, password: ${JSON.stringify(credentials.password)} }`,
    "",
  ].join("\n");
  await mkdir(dataDir, { recursive: true });
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, text, { mode: 0o600 });
  await chmod(temp, 0o600);
  await rename(temp, file);
  return file;
}

export interface EmbeddedServerOptions {
  readonly host: string;
  readonly port: number;
  readonly serverName: string;
  readonly storeDir: string;
  /** Every gateway id that serves admin requests here: one, or each worker's (`run --workers`). */
  readonly gatewayIds: readonly string[];
  readonly adminUser: string;
  readonly adminPassword: string;
  /** nats.embedded_max_payload: max_payload has no command-line flag, the file holds it. */
  readonly maxPayload: number;
}

/**
 * The nats-server config. The admin user may do what `generate` gives the gateway's admin
 * user (the three scopes, $SYS.REQ.USER.INFO, replies) and send admin requests (ctl).
 * CLIENTS keeps every subject open to its clients, as a server without accounts would:
 * the gateway itself refuses MQTT and AMQP clients under $MQG.
 */
export function embeddedServerConfig(o: EmbeddedServerOptions): string {
  const q = (s: string) => JSON.stringify(s);
  const list = (items: string[]) => `[${items.map(q).join(", ")}]`;
  return [
    "# Written by mq-gateway at each start of its embedded nats-server; edits are overwritten.",
    `server_name: ${q(o.serverName)}`,
    `listen: ${q(`${o.host.includes(":") ? `[${o.host}]` : o.host}:${o.port}`)}`,
    `jetstream { store_dir: ${q(o.storeDir)} }`,
    `max_payload: ${o.maxPayload}`,
    "accounts {",
    `  ${EMBEDDED_ADMIN_ACCOUNT} {`,
    // The bans bucket lives here (docs/decisions/bans.md).
    "    jetstream: enabled",
    "    users: [",
    `      { user: ${q(o.adminUser)}, password: ${q(o.adminPassword)}, permissions: {`,
    `        publish: ${list(["$MQG.admin.>", "$SYS.REQ.USER.INFO", ...bansBucketApi()])}`,
    `        subscribe: ${list([...o.gatewayIds.map((id) => `$MQG.admin.server.${id}.>`), "$MQG.admin.ping.>", "$MQG.admin.account.*.>", "_INBOX.>"])}`,
    "        allow_responses: true",
    "      } }",
    "    ]",
    "  }",
    `  ${EMBEDDED_CLIENT_ACCOUNT} {`,
    "    jetstream: enabled",
    `    users: [ { user: ${q(NO_AUTH_USER)} } ]`,
    "  }",
    "}",
    `no_auth_user: ${q(NO_AUTH_USER)}`,
    "",
  ].join("\n");
}

/**
 * Everything the embedded start needs beyond the child process: the admin user, the
 * nats-server config writer, and the admin file written once the server answers.
 */
export async function prepareEmbedded(
  config: GatewayConfig,
  gatewayIds: readonly string[] = [config.id],
): Promise<{
  readonly admin: Credentials;
  readonly writeConfig: (storeDir: string, serverName: string) => Promise<string>;
  readonly writeAdminFile: (url: string) => Promise<string>;
}> {
  const admin = await embeddedAdmin(config);
  const user = admin.credentials.kind === "user" ? admin.credentials.user : EMBEDDED_ADMIN_USER;
  const at = config.nats.embedded_listen;
  return {
    admin: admin.credentials,
    writeConfig: async (storeDir, serverName) => {
      const file = join(config.data, "nats-server.conf");
      const text = embeddedServerConfig({
        host: at.host,
        port: at.port,
        serverName,
        storeDir,
        gatewayIds,
        adminUser: user,
        adminPassword: admin.password,
        maxPayload: config.nats.embedded_max_payload,
      });
      await mkdir(config.data, { recursive: true });
      await writeFile(file, text, { mode: 0o600 });
      await chmod(file, 0o600);
      return file;
    },
    writeAdminFile: (url) => writeAdminFile(config.data, url, admin.credentials),
  };
}
