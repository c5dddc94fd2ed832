// `mq-gateway ctl`: the operator's tool over the admin subjects (admin-subjects.md,
// docs/admin-subjects.md), in the manner of `rabbitmqctl` and `emqx ctl`: lists as tables
// (or --json), one line per action, exit 0 when it happened. It needs no nats CLI.
import type { Command } from "commander";
import { parseDuration } from "../config/units.js";
// Types only: nats.js and the config loader load when a ctl command runs, not for --help.
import type { AdminClient, Reply } from "./ctlClient.js";
import { CtlError } from "./ctlError.js";
import { type CtlOptions, gatewayReplies, json, noGateway, type Out, refusedBy, sortById } from "./ctlReplies.js";
import { addStoreCommands } from "./ctlStore.js";
import { table } from "./table.js";

/** The gateway answers a kick once the connection has left it, within 5 s (docs/decisions/admin-api.md). */
const KICK_WAIT_MS = 7_000;

/** Adds `ctl` and its commands to the program; each action reports its exit code through `done`. */
export function addCtl(program: Command, done: (code: number) => void): void {
  const ctl = program
    .command("ctl")
    .description(
      "ask running gateways over the admin subjects: info, clients, kick, ldm, rebalance, sessions, subscriptions, retained, ban",
    )
    .option("-c, --config <file>", "take nats.servers and the admin user from this gateway config")
    .option(
      "--data <dir>",
      "the gateway's data directory, where it keeps admin.yaml for its embedded nats-server",
      "./data",
    )
    .option("-s, --server <urls>", "NATS server URL(s), comma-separated (overrides the config)")
    .option("--user <user>", "admin user (with --password)")
    .option("--password <password>", 'its password; "file:/path" and "env:NAME" work as in the config')
    .option("--token <token>", "admin token")
    .option("--creds <file>", "admin creds file (operator mode)")
    .option("--nkey <file>", "admin nkey seed file")
    .option("--timeout <duration>", "how long to wait for the gateways' replies", "1s")
    .option("--json", "print the gateways' replies as JSON");

  // commander calls an action with the positional arguments, then the options, then the command.
  const run =
    (body: (admin: AdminClient, options: CtlOptions, out: Out, ...positional: unknown[]) => Promise<number>) =>
    async (...args: unknown[]) => {
      const command = args[args.length - 1] as Command;
      const positional = args.slice(0, -2);
      done(
        await withAdmin(command.optsWithGlobals() as CtlOptions, (admin, options) =>
          body(admin, options, process.stdout, ...positional),
        ),
      );
    };

  ctl
    .command("info")
    .description("every gateway: id, version, since when, clients per account")
    .option("--account <account>", "one account's gateways and clients only")
    .option("--gateway <id>", "one gateway only")
    .action(run(info));
  ctl
    .command("clients")
    .alias("list")
    .description("the connected clients of every gateway (oldest first)")
    .option("--account <account>", "clients of this account only")
    .option("--client-id <id>", "clients with this client id only")
    .option("--gateway <id>", "clients of this gateway only")
    .action(run(clients));
  ctl
    .command("kick")
    .description("close one client's connection (MQTT 5: DISCONNECT 0x98); its will is published")
    .argument("[client-id]", "the client id (MQTT) or container id (AMQP)")
    .option("--account <account>", "the client's account (found with clients when left out)")
    .option("--cid <cid>", "kick by connection id instead (from clients), on --gateway")
    .option("--gateway <id>", "the gateway holding the client")
    .action(run(kick));
  ctl
    .command("ldm")
    .description("lame duck mode: the gateway closes its listeners, lets its clients go over ldm.duration, then stops")
    .option("--gateway <id>", "which gateway (may be left out when only one answers)")
    .action(run(ldm));
  ctl
    .command("rebalance")
    .description("move one account's client NATS connections of one gateway onto a NATS server")
    .requiredOption("--account <account>", "whose clients")
    .requiredOption("--to <server>", "the NATS server (its server_name or URL) to move them to")
    .option("--max <n>", "move at most this many connections")
    .option("--over <duration>", "spread the moves over this long, e.g. 30s")
    .option("--gateway <id>", "which gateway (may be left out when only one answers)")
    .action(run(rebalance));
  addStoreCommands(ctl, run);
}

async function withAdmin(
  options: CtlOptions,
  body: (admin: AdminClient, options: CtlOptions) => Promise<number>,
): Promise<number> {
  try {
    const timeout = parseDuration(options.timeout);
    if (!timeout.ok) throw new CtlError(`--timeout: ${timeout.error}`);
    const { AdminClient, connectAdmin, resolveTarget } = await import("./ctlClient.js");
    const nc = await connectAdmin(await resolveTarget(options));
    const admin = new AdminClient(nc, Math.max(1, timeout.value));
    try {
      return await body(admin, options);
    } finally {
      await admin.close().catch(() => {});
    }
  } catch (e) {
    if (!(e instanceof CtlError)) throw e;
    process.stderr.write(`mq-gateway ctl: ${e.message}\n`);
    return e.code;
  }
}

async function info(admin: AdminClient, options: CtlOptions, out: Out, ..._: unknown[]): Promise<number> {
  const o = options as CtlOptions & { account?: string; gateway?: string };
  const replies = sortById(await gatewayReplies(admin, "info", o, {}, options));
  refusedBy(replies);
  if (options.json) {
    json(out, replies);
    return 0;
  }
  const rows: string[][] = [];
  for (const r of replies) {
    const accounts = Object.entries((r.accounts ?? {}) as Record<string, { mqtt: number; amqp: number }>);
    if (accounts.length === 0) rows.push([String(r.id), String(r.version), String(r.since), "-", "0", "0"]);
    for (const [account, n] of accounts.sort(([a], [b]) => a.localeCompare(b)))
      rows.push([String(r.id), String(r.version), String(r.since), account || '""', String(n.mqtt), String(n.amqp)]);
  }
  out.write(table(["GATEWAY", "VERSION", "SINCE", "ACCOUNT", "MQTT", "AMQP"], rows));
  return 0;
}

interface ListEntry {
  readonly cid: number;
  readonly account: string;
  readonly protocol: string;
  readonly client_id: string;
  readonly remote: string;
  readonly since: string;
  readonly nats_server: string;
}

async function listed(
  admin: AdminClient,
  o: { account?: string; gateway?: string },
  options: CtlOptions,
): Promise<Reply[]> {
  const body = o.account ? { account: o.account } : {};
  const replies = sortById(
    await gatewayReplies(admin, "list", { ...(o.gateway ? { gateway: o.gateway } : {}) }, body, options),
  );
  refusedBy(replies);
  return replies;
}

async function clients(admin: AdminClient, options: CtlOptions, out: Out, ..._: unknown[]): Promise<number> {
  const o = options as CtlOptions & { account?: string; gateway?: string; clientId?: string };
  const replies = await listed(admin, o, options);
  const keep = (c: ListEntry) => o.clientId === undefined || c.client_id === o.clientId;
  const filtered: Array<Reply & { clients: ListEntry[] }> = replies.map((r) => ({
    ...r,
    clients: ((r.clients ?? []) as ListEntry[]).filter(keep),
  }));
  // A client id filter is ctl's own: the count is what it kept.
  if (o.clientId !== undefined) for (const r of filtered) r.count = r.clients.length;
  if (options.json) {
    json(out, filtered);
    return 0;
  }
  const rows = filtered.flatMap((r) =>
    r.clients.map((c) => [
      String(r.id),
      String(c.cid),
      c.protocol,
      c.account || '""',
      c.client_id,
      c.remote,
      c.since,
      c.nats_server,
    ]),
  );
  out.write(table(["GATEWAY", "CID", "PROTOCOL", "ACCOUNT", "CLIENT ID", "REMOTE", "SINCE", "NATS SERVER"], rows));
  const gateways = filtered.length;
  out.write(
    `${rows.length} client${rows.length === 1 ? "" : "s"} on ${gateways} gateway${gateways === 1 ? "" : "s"}\n`,
  );
  for (const r of filtered)
    if (r.truncated)
      out.write(
        `gateway ${String(r.id)} has ${String(r.count)} matching clients; its reply lists the first ${(r.clients as unknown[]).length} of them (list is capped)\n`,
      );
  return 0;
}

async function kick(admin: AdminClient, options: CtlOptions, out: Out, clientId?: unknown): Promise<number> {
  const o = options as CtlOptions & { account?: string; gateway?: string; cid?: string };
  if (o.cid !== undefined) {
    const cid = Number(o.cid);
    if (!Number.isSafeInteger(cid) || cid < 1)
      throw new CtlError(`--cid must be a connection id from ctl clients, got ${o.cid}`);
    const gateway = o.gateway ?? (await onlyGateway(admin, options));
    return kicked(out, options, `cid ${cid}`, [
      await admin.one(`$MQG.admin.server.${gateway}.kick`, { cid }, KICK_WAIT_MS),
    ]);
  }
  if (typeof clientId !== "string") throw new CtlError("kick needs a client id (or --cid N --gateway ID)");
  if (o.account !== undefined && o.gateway !== undefined)
    return kicked(out, options, clientId, [
      await admin.one(`$MQG.admin.server.${o.gateway}.kick`, { client_id: clientId, account: o.account }, KICK_WAIT_MS),
    ]);
  if (o.account !== undefined) {
    // Every gateway serving the account answers; count them first so the wait ends with the last reply.
    const serving = await admin.many(`$MQG.admin.account.${o.account}.info`);
    if (serving.length === 0) throw new CtlError(`no gateway serves account ${o.account}`, 2);
    const replies = await admin.many(
      `$MQG.admin.account.${o.account}.kick`,
      { client_id: clientId },
      { expect: serving.length, waitMs: KICK_WAIT_MS },
    );
    return kicked(out, options, clientId, replies);
  }
  // No account given: find the connection, then kick it by cid where it is.
  const found = (await listed(admin, o, options)).flatMap((r) =>
    ((r.clients ?? []) as ListEntry[])
      .filter((c) => c.client_id === clientId)
      .map((c) => ({ gateway: String(r.id), ...c })),
  );
  if (found.length === 0) throw new CtlError(`no client ${clientId} on any gateway that answered`);
  if (found.length > 1)
    throw new CtlError(
      `${found.length} connections have client id ${clientId}; kick one with --cid and --gateway:\n` +
        table(
          ["GATEWAY", "CID", "ACCOUNT", "REMOTE"],
          found.map((c) => [c.gateway, String(c.cid), c.account || '""', c.remote]),
        ).trimEnd(),
    );
  const [target] = found as [(typeof found)[number]];
  return kicked(out, options, clientId, [
    await admin.one(`$MQG.admin.server.${target.gateway}.kick`, { cid: target.cid }, KICK_WAIT_MS),
  ]);
}

function kicked(out: Out, options: CtlOptions, who: string, replies: Reply[]): number {
  refusedBy(replies);
  if (options.json) {
    json(out, replies);
    return replies.some((r) => r.kicked === true) ? 0 : 1;
  }
  const done = replies.filter((r) => r.kicked === true);
  for (const r of done) out.write(`kicked ${who} (cid ${String(r.cid)}) on gateway ${String(r.id)}\n`);
  if (done.length > 0) return 0;
  throw new CtlError(replies.map((r) => `${who} not kicked (gateway ${String(r.id)}): ${String(r.reason)}`).join("\n"));
}

/** The gateway a server-scope op goes to when --gateway is left out: the only one there is. */
async function onlyGateway(admin: AdminClient, options: CtlOptions): Promise<string> {
  const ids = await addressed(admin, options);
  if (ids.length > 1)
    throw new CtlError(`${ids.length} gateways answered (${ids.join(", ")}): say which with --gateway ID`);
  return ids[0]!;
}

/**
 * The gateways an ldm or rebalance goes to when --gateway is left out: the only one there
 * is, or every worker of one `run --workers` group (their info answers name the same group).
 */
async function addressed(admin: AdminClient, options: CtlOptions): Promise<string[]> {
  const replies = sortById(await admin.many("$MQG.admin.ping.info"));
  if (replies.length === 0) throw noGateway("$MQG.admin.ping.info", options.timeout);
  const ids = replies.map((r) => String(r.id));
  const groups = new Set(replies.map((r) => r.group));
  if (replies.length > 1 && (groups.size > 1 || typeof replies[0]?.group !== "string"))
    throw new CtlError(`${replies.length} gateways answered (${ids.join(", ")}): say which with --gateway ID`);
  return ids;
}

async function ldm(admin: AdminClient, options: CtlOptions, out: Out, ..._: unknown[]): Promise<number> {
  const o = options as CtlOptions & { gateway?: string };
  const gateways = o.gateway ? [o.gateway] : await addressed(admin, options);
  const replies = await Promise.all(
    gateways.map(async (id): Promise<Reply> => ({ id, ...(await admin.one(`$MQG.admin.server.${id}.ldm`)) })),
  );
  refusedBy(replies);
  const started = replies.every((r) => r.started === true);
  if (options.json) {
    json(out, gateways.length === 1 ? replies[0] : replies);
    return started ? 0 : 1;
  }
  const notStarted = replies.filter((r) => r.started !== true);
  if (notStarted.length > 0)
    throw new CtlError(
      notStarted.map((r) => `gateway ${String(r.id)}: lame duck mode not started: ${String(r.reason)}`).join("\n"),
    );
  for (const r of replies)
    out.write(`gateway ${String(r.id)}: lame duck mode started (it stops once its clients are gone)\n`);
  return 0;
}

async function rebalance(admin: AdminClient, options: CtlOptions, out: Out, ..._: unknown[]): Promise<number> {
  const o = options as CtlOptions & { gateway?: string; account: string; to: string; max?: string; over?: string };
  const body: Record<string, unknown> = { account: o.account, server: o.to };
  if (o.max !== undefined) body.max = Number(o.max);
  if (o.over !== undefined) body.over = o.over;
  // A worker group moves each worker's connections: --max is each worker's.
  const gateways = o.gateway ? [o.gateway] : await addressed(admin, options);
  const replies = await Promise.all(
    gateways.map(
      async (id): Promise<Reply> => ({ id, ...(await admin.one(`$MQG.admin.server.${id}.rebalance`, body)) }),
    ),
  );
  refusedBy(replies);
  const started = replies.every((r) => r.started === true);
  if (options.json) {
    json(out, gateways.length === 1 ? replies[0] : replies);
    return started ? 0 : 1;
  }
  const notStarted = replies.filter((r) => r.started !== true);
  if (notStarted.length > 0)
    throw new CtlError(
      notStarted.map((r) => `gateway ${String(r.id)}: rebalance not started: ${String(r.reason)}`).join("\n"),
    );
  for (const r of replies)
    out.write(
      `gateway ${String(r.id)}: moving account ${o.account}'s connections to ${String(r.server)} (max ${String(r.max)}, over ${String(r.over)})\n`,
    );
  return 0;
}
