// ctl's commands over what the gateways keep in NATS and their live subscriptions
// (docs/admin-subjects.md): sessions, subscriptions, retained messages and bans.
import type { Command } from "commander";
import type { AdminClient, Reply } from "./ctlClient.js";
import { CtlError } from "./ctlError.js";
import {
  type CtlBody,
  type CtlOptions,
  gatewayReplies,
  json,
  noGateway,
  type Out,
  refusedBy,
  sortById,
} from "./ctlReplies.js";
import { table } from "./table.js";

type Run = (body: CtlBody) => (...args: unknown[]) => Promise<void>;

/** A session drop waits for the client to leave its gateway (5 s at most) and NATS (10 s). */
const STORE_WAIT_MS = 12_000;

interface StoreFlags extends CtlOptions {
  readonly account?: string;
  readonly gateway?: string;
  readonly clientId?: string;
}

export function addStoreCommands(ctl: Command, run: Run): void {
  const sessions = ctl
    .command("sessions")
    .description("persistent MQTT sessions in the sessions bucket: list, show, drop");
  sessions
    .command("list", { isDefault: true })
    .description("every session of the account: client id, connected where, subscriptions")
    .option("--account <account>", "whose sessions (may be left out when the gateway serves one account)")
    .option("--client-id <id>", "this client's session only")
    .option("--gateway <id>", "ask this gateway (any gateway of the account answers alike)")
    .action(run(sessionsList));
  sessions
    .command("show")
    .description("one session, with what waits in each of its consumers")
    .argument("<client-id>")
    .option("--account <account>", "the session's account")
    .option("--gateway <id>", "ask this gateway")
    .action(run(sessionsShow));
  sessions
    .command("drop")
    .description(
      "delete a session: its client is disconnected (MQTT 5: 0x98) wherever it is, then its consumers and record go",
    )
    .argument("<client-id>")
    .option("--account <account>", "the session's account")
    .option("--gateway <id>", "ask this gateway")
    .action(run(sessionsDrop));
  ctl
    .command("subscriptions")
    .description("the live subscriptions of every gateway's clients: MQTT filter and QoS, AMQP source address")
    .option("--account <account>", "clients of this account only")
    .option("--client-id <id>", "this client's subscriptions only")
    .option("--gateway <id>", "this gateway's clients only")
    .action(run(subscriptions));
  const retained = ctl.command("retained").description("retained messages in the retained stream: list, clear");
  retained
    .command("list", { isDefault: true })
    .description("retained messages under a topic filter (all when left out)")
    .argument("[filter]", "an MQTT topic filter, e.g. plant/+/temp or plant/#")
    .option("--account <account>", "whose retained messages")
    .option("--gateway <id>", "ask this gateway")
    .action(run(retainedList));
  retained
    .command("clear")
    .description("delete the retained messages of one topic, or of every topic a filter matches")
    .argument("<filter>", "a topic, or an MQTT topic filter")
    .option("--account <account>", "whose retained messages")
    .option("--gateway <id>", "ask this gateway")
    .action(run(retainedClear));
  const target = (c: Command) =>
    c
      .argument("[client-id]", "the client id (MQTT) or container id (AMQP)")
      .option("--username <user>", "by the username the client logs in with")
      .option("--address <ip-or-cidr>", "by the client's IP address or CIDR block")
      .option("--gateway <id>", "ask this gateway (every gateway applies it alike)");
  target(
    ctl
      .command("ban")
      .description(
        "refuse a client on every gateway (MQTT 5 CONNACK 0x8A, 3.1.1 0x05, AMQP amqp:unauthorized-access); a connected one is kicked",
      ),
  )
    .option("--for <duration>", "the ban ends after this long, e.g. 10m (default: until unbanned)")
    .option("--reason <text>", "why, shown by ctl bans and in the refusal's log line")
    .action(run(ban));
  target(ctl.command("unban").description("end a ban")).action(run(unban));
  ctl.command("bans").description("the bans in force").option("--gateway <id>", "ask this gateway").action(run(bans));
}

/**
 * The gateway a store op goes to: --gateway, else the first to answer `info` for the
 * account (or at all). Every gateway of an account reads and writes the same bucket and
 * stream, so any one does; one, so that a write is made once.
 */
async function storeGateway(admin: AdminClient, o: StoreFlags): Promise<string> {
  if (o.gateway) return o.gateway;
  const subject = o.account ? `$MQG.admin.account.${o.account}.info` : "$MQG.admin.ping.info";
  const [first] = sortById(await admin.many(subject, {}, { expect: 1 }));
  if (!first) throw noGateway(subject, o.timeout);
  return String(first.id);
}

async function storeRequest(
  admin: AdminClient,
  o: StoreFlags,
  op: string,
  body: Record<string, unknown>,
): Promise<Reply> {
  const gateway = await storeGateway(admin, o);
  const reply = await admin.one(
    `$MQG.admin.server.${gateway}.${op}`,
    { ...(o.account ? { account: o.account } : {}), ...body },
    STORE_WAIT_MS,
  );
  refusedBy([{ id: gateway, ...reply }]);
  return reply;
}

interface SessionEntry {
  client_id: string;
  connected: boolean;
  gateway: string | null;
  expires_at: string;
  subscriptions: Array<{
    filter: string;
    qos: number;
    stream?: string;
    consumer?: string;
    pending?: number;
    ack_pending?: number;
  }>;
}

const shownSubscriptions = (s: SessionEntry) =>
  s.subscriptions.map((x) => `${x.filter} (QoS ${x.qos})`).join(", ") || "-";

async function sessionsList(admin: AdminClient, options: CtlOptions, out: Out): Promise<number> {
  const o = options as StoreFlags;
  const reply = await storeRequest(admin, o, "sessions", o.clientId ? { client_id: o.clientId } : {});
  if (options.json) {
    json(out, reply);
    return 0;
  }
  const list = (reply.sessions ?? []) as SessionEntry[];
  out.write(
    table(
      ["CLIENT ID", "CONNECTED", "GATEWAY", "EXPIRES", "SUBSCRIPTIONS"],
      list.map((s) => [
        s.client_id,
        s.connected ? "yes" : "no",
        s.gateway ?? "-",
        s.connected ? "-" : s.expires_at,
        shownSubscriptions(s),
      ]),
    ),
  );
  out.write(`${list.length} session${list.length === 1 ? "" : "s"} in account ${String(reply.account) || '""'}\n`);
  if (reply.truncated) out.write(`the reply lists ${list.length} of ${String(reply.count)} (it is capped)\n`);
  return 0;
}

async function sessionsShow(admin: AdminClient, options: CtlOptions, out: Out, clientId: unknown): Promise<number> {
  const reply = await storeRequest(admin, options as StoreFlags, "sessions.show", { client_id: clientId });
  if (options.json) {
    json(out, reply);
    return reply.found === true ? 0 : 1;
  }
  if (reply.found !== true) throw new CtlError(String(reply.reason));
  const s = reply.session as SessionEntry;
  out.write(`client id:  ${s.client_id}\naccount:    ${String(reply.account) || '""'}\n`);
  out.write(
    `connected:  ${s.connected ? `yes, on gateway ${s.gateway ?? "?"}` : `no (last on ${s.gateway ?? "?"}; expires ${s.expires_at})`}\n`,
  );
  out.write(
    table(
      ["FILTER", "QOS", "STREAM", "CONSUMER", "PENDING", "UNACKED"],
      s.subscriptions.map((x) => [
        x.filter,
        String(x.qos),
        x.stream ?? "-",
        x.consumer ?? "-",
        String(x.pending ?? "-"),
        String(x.ack_pending ?? "-"),
      ]),
    ),
  );
  return 0;
}

async function sessionsDrop(admin: AdminClient, options: CtlOptions, out: Out, clientId: unknown): Promise<number> {
  const reply = await storeRequest(admin, options as StoreFlags, "sessions.drop", { client_id: clientId });
  if (options.json) {
    json(out, reply);
    return reply.dropped === true ? 0 : 1;
  }
  if (reply.dropped !== true) throw new CtlError(`session of ${String(clientId)} not dropped: ${String(reply.reason)}`);
  const kicked = reply.kicked ? `; its client was disconnected from gateway ${String(reply.kicked)}` : "";
  out.write(`dropped the session of ${String(clientId)} (${String(reply.consumers)} consumer(s) deleted${kicked})\n`);
  return 0;
}

interface SubscriptionEntry {
  cid: number;
  account: string;
  protocol: string;
  client_id: string;
  filter: string;
  qos: number | null;
}

async function subscriptions(admin: AdminClient, options: CtlOptions, out: Out): Promise<number> {
  const o = options as StoreFlags;
  const body = { ...(o.account ? { account: o.account } : {}), ...(o.clientId ? { client_id: o.clientId } : {}) };
  const replies = sortById(
    await gatewayReplies(admin, "subscriptions", o.gateway ? { gateway: o.gateway } : {}, body, options),
  );
  refusedBy(replies);
  if (options.json) {
    json(out, replies);
    return 0;
  }
  const rows = replies.flatMap((r) =>
    ((r.subscriptions ?? []) as SubscriptionEntry[]).map((s) => [
      String(r.id),
      String(s.cid),
      s.protocol,
      s.account || '""',
      s.client_id,
      s.filter,
      s.qos === null ? "-" : String(s.qos),
    ]),
  );
  out.write(table(["GATEWAY", "CID", "PROTOCOL", "ACCOUNT", "CLIENT ID", "FILTER", "QOS"], rows));
  out.write(
    `${rows.length} subscription${rows.length === 1 ? "" : "s"} on ${replies.length} gateway${replies.length === 1 ? "" : "s"}\n`,
  );
  for (const r of replies)
    if (r.truncated)
      out.write(`gateway ${String(r.id)} has ${String(r.count)} matching subscriptions; its reply is capped\n`);
  return 0;
}

async function retainedList(admin: AdminClient, options: CtlOptions, out: Out, filter?: unknown): Promise<number> {
  const reply = await storeRequest(
    admin,
    options as StoreFlags,
    "retained",
    typeof filter === "string" ? { filter } : {},
  );
  if (options.json) {
    json(out, reply);
    return 0;
  }
  const list = (reply.retained ?? []) as Array<{ topic: string; bytes: number; time: string }>;
  out.write(
    table(
      ["TOPIC", "BYTES", "STORED"],
      list.map((m) => [m.topic, String(m.bytes), m.time]),
    ),
  );
  out.write(`${String(reply.count)} retained message${reply.count === 1 ? "" : "s"}\n`);
  if (reply.truncated) out.write(`the reply lists the first ${list.length} of them (it is capped)\n`);
  return 0;
}

async function retainedClear(admin: AdminClient, options: CtlOptions, out: Out, filter: unknown): Promise<number> {
  const reply = await storeRequest(admin, options as StoreFlags, "retained.clear", { filter });
  if (options.json) {
    json(out, reply);
    return 0;
  }
  out.write(
    `cleared ${String(reply.cleared)} retained message${reply.cleared === 1 ? "" : "s"} under ${String(filter)}\n`,
  );
  return 0;
}

/** The one thing a ban or unban names: a client id argument, --username or --address. */
function banTarget(options: CtlOptions, clientId: unknown): { key: string; value: string } {
  const o = options as CtlOptions & { username?: string; address?: string };
  const given = [
    ...(typeof clientId === "string" ? [{ key: "client_id", value: clientId }] : []),
    ...(o.username !== undefined ? [{ key: "username", value: o.username }] : []),
    ...(o.address !== undefined ? [{ key: "address", value: o.address }] : []),
  ];
  if (given.length !== 1) throw new CtlError("name one client id, --username or --address");
  return given[0]!;
}

async function ban(admin: AdminClient, options: CtlOptions, out: Out, clientId?: unknown): Promise<number> {
  const o = options as StoreFlags & { for?: string; reason?: string };
  const t = banTarget(options, clientId);
  const body = { [t.key]: t.value, ...(o.for ? { for: o.for } : {}), ...(o.reason ? { reason: o.reason } : {}) };
  const reply = await storeRequest(admin, { ...o, account: undefined }, "ban", body);
  if (options.json) {
    json(out, reply);
    return 0;
  }
  const b = reply.ban as { until?: string };
  out.write(`banned ${t.key.replace("_", " ")} ${t.value} on every gateway${b.until ? ` until ${b.until}` : ""}\n`);
  return 0;
}

async function unban(admin: AdminClient, options: CtlOptions, out: Out, clientId?: unknown): Promise<number> {
  const t = banTarget(options, clientId);
  const reply = await storeRequest(admin, { ...(options as StoreFlags), account: undefined }, "unban", {
    [t.key]: t.value,
  });
  if (options.json) {
    json(out, reply);
    return reply.unbanned === true ? 0 : 1;
  }
  if (reply.unbanned !== true) throw new CtlError(`no ban of ${t.key.replace("_", " ")} ${t.value}`);
  out.write(`unbanned ${t.key.replace("_", " ")} ${t.value}\n`);
  return 0;
}

async function bans(admin: AdminClient, options: CtlOptions, out: Out): Promise<number> {
  const reply = await storeRequest(admin, { ...(options as StoreFlags), account: undefined }, "bans", {});
  if (options.json) {
    json(out, reply);
    return 0;
  }
  const list = (reply.bans ?? []) as Array<{
    kind: string;
    value: string;
    since: string;
    until?: string;
    reason?: string;
  }>;
  out.write(
    table(
      ["KIND", "VALUE", "SINCE", "UNTIL", "REASON"],
      list.map((b) => [b.kind, b.value, b.since, b.until ?? "-", b.reason ?? ""]),
    ),
  );
  out.write(`${list.length} ban${list.length === 1 ? "" : "s"}\n`);
  return 0;
}
