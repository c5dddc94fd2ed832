// `mq-gateway ctl`'s NATS side: which credentials, which servers, and the admin requests
// themselves (admin-subjects.md). One reply from the server scope; on the ping and account
// scopes every gateway answers for itself, so replies are collected until the timeout or
// until as many as expected have come.
import { join } from "node:path";
import { type ConnectionOptions, connect, type NatsConnection } from "@nats-io/transport-node";
import { bridgeCredentials } from "../actors/gatewayCredentials.js";
import { natsTlsOptions } from "../actors/natsTls.js";
import { loadConfig } from "../config/load.js";
import type { ClientTls, Credentials } from "../config/schema.js";
import { ADMIN_FILE } from "../gateway/embeddedAccounts.js";
import { CtlError } from "./ctlError.js";

export { CtlError };

export interface CtlConnectionFlags {
  readonly config?: string;
  readonly data?: string;
  readonly server?: string;
  readonly user?: string;
  readonly password?: string;
  readonly token?: string;
  readonly creds?: string;
  readonly nkey?: string;
}

interface Target {
  readonly servers: readonly string[];
  readonly credentials: Credentials | null;
  readonly tls: ClientTls | null;
  /** Where the credentials came from, for error messages. */
  readonly source: string;
}

/**
 * Where ctl connects and as whom: flags first; else the config's nats.servers and admin
 * user; else (no --config, or a config on the embedded nats-server) the admin file the
 * gateway writes into its data directory.
 */
export async function resolveTarget(flags: CtlConnectionFlags): Promise<Target> {
  const fromFlags = flagCredentials(flags);
  let base: Target | undefined;
  if (flags.config !== undefined) {
    const loaded = await loadConfig({
      file: flags.config,
      flags: flags.data !== undefined ? { data: flags.data } : {},
    });
    if (!loaded.ok) throw new CtlError(loaded.problems.join("\n"));
    const c = loaded.config;
    if (c.nats.servers.length > 0 || flags.server !== undefined)
      base = { servers: c.nats.servers, credentials: c.admin, tls: c.nats.tls, source: flags.config };
    else base = await adminFile(join(c.data, ADMIN_FILE), c.nats.tls);
  } else if (flags.server === undefined || fromFlags === null) {
    base = await adminFile(join(flags.data ?? "./data", ADMIN_FILE), null).catch((e: unknown) => {
      if (flags.server !== undefined) return undefined;
      throw e;
    });
  }
  const servers = flags.server !== undefined ? splitServers(flags.server) : (base?.servers ?? []);
  if (servers.length === 0) throw new CtlError("no NATS server to ask: give --server URL or --config FILE", 2);
  return {
    servers,
    credentials: fromFlags ?? base?.credentials ?? null,
    tls: base?.tls ?? null,
    source: base?.source ?? "the flags",
  };
}

async function adminFile(file: string, tls: ClientTls | null): Promise<Target> {
  const loaded = await loadConfig({ file });
  if (!loaded.ok) {
    if (loaded.problems.some((p) => p.includes("no such file")))
      throw new CtlError(
        `no admin credentials: ${file} is not there (the gateway writes it when it runs its embedded nats-server); ` +
          "run ctl from the gateway's working directory, or give --data DIR, --config FILE (with nats.servers and admin), or --server and --user/--password",
        2,
      );
    throw new CtlError(loaded.problems.join("\n"));
  }
  return { servers: loaded.config.nats.servers, credentials: loaded.config.admin, tls, source: file };
}

function flagCredentials(flags: CtlConnectionFlags): Credentials | null {
  const ways = [flags.user !== undefined || flags.password !== undefined, flags.token, flags.creds, flags.nkey].filter(
    Boolean,
  ).length;
  if (ways > 1) throw new CtlError("give one of --user/--password, --token, --creds or --nkey");
  if (flags.token !== undefined) return { kind: "token", token: flags.token };
  if (flags.creds !== undefined) return { kind: "creds", creds_file: flags.creds };
  if (flags.nkey !== undefined) return { kind: "nkey", nkey_seed_file: flags.nkey };
  if (flags.user !== undefined) {
    if (flags.password === undefined) throw new CtlError("--user needs --password");
    return { kind: "user", user: flags.user, password: flags.password };
  }
  if (flags.password !== undefined)
    throw new CtlError("--password needs --user (a password alone is a token: use --token)");
  return null;
}

const splitServers = (text: string) =>
  text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");

export async function connectAdmin(target: Target): Promise<NatsConnection> {
  const options: ConnectionOptions = {
    servers: [...target.servers],
    name: "mq-gateway ctl",
    maxReconnectAttempts: 0,
    timeout: 5_000,
  };
  if (target.credentials) {
    let creds: Awaited<ReturnType<typeof bridgeCredentials>>;
    try {
      creds = await bridgeCredentials(target.credentials);
    } catch (e) {
      throw new CtlError(`the admin credentials from ${target.source}: ${(e as Error).message}`);
    }
    if (creds.user !== undefined) options.user = creds.user;
    if (creds.pass !== undefined) options.pass = creds.pass;
    if (creds.token !== undefined) options.token = creds.token;
    if (creds.authenticator) options.authenticator = creds.authenticator;
  }
  const tls = natsTlsOptions(target.tls);
  if (tls) options.tls = tls;
  try {
    return await connect(options);
  } catch (e) {
    const why = (e as Error).message;
    if (/authoriz|authenticat/i.test(why))
      throw new CtlError(
        `NATS at ${target.servers.join(", ")} refused the admin user from ${target.source}: ${why}`,
        2,
      );
    throw new CtlError(`cannot reach NATS at ${target.servers.join(", ")}: ${why} (is the gateway running?)`, 2);
  }
}

export type Reply = Record<string, unknown>;

/** The admin requests of one ctl run. */
export class AdminClient {
  constructor(
    private readonly nc: NatsConnection,
    private readonly timeoutMs: number,
  ) {}

  /** The server scope: one gateway, one reply. */
  async one(subject: string, body: object = {}, waitMs = this.timeoutMs): Promise<Reply> {
    try {
      const msg = await this.nc.request(subject, JSON.stringify(body), { timeout: waitMs });
      return msg.json<Reply>();
    } catch (e) {
      const why = (e as Error).message;
      if (/no responders/i.test(why) || (e as { name?: string }).name === "NoRespondersError")
        throw new CtlError(`no gateway answers ${subject} (is the id right? ctl info lists them)`, 2);
      if (/timeout/i.test(why)) throw new CtlError(`no answer to ${subject} within ${waitMs} ms`, 2);
      throw new CtlError(`${subject}: ${why}`, 2);
    }
  }

  /** The ping and account scopes: every gateway's reply, until `expect` have come or the wait ends. */
  async many(subject: string, body: object = {}, options: { expect?: number; waitMs?: number } = {}): Promise<Reply[]> {
    const waitMs = options.waitMs ?? this.timeoutMs;
    const out: Reply[] = [];
    try {
      const replies = await this.nc.requestMany(subject, JSON.stringify(body), {
        maxWait: waitMs,
        ...(options.expect ? { strategy: "count", maxMessages: options.expect } : { strategy: "timer" }),
      });
      for await (const msg of replies) {
        // A "no responders" status arrives as an empty message with headers: nobody is there.
        if (msg.data.length === 0) continue;
        out.push(msg.json<Reply>());
      }
    } catch (e) {
      if (!/no responders/i.test((e as Error).message)) throw new CtlError(`${subject}: ${(e as Error).message}`, 2);
    }
    return out;
  }

  close(): Promise<void> {
    return this.nc.close();
  }
}
