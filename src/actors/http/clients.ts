// GET /clients: this gateway's connected clients as JSON, paged the way nats-server's
// /connz is (offset, limit, total), so a dashboard or a script can walk a gateway with a
// hundred thousand clients without one huge answer. The admin `list` (over NATS) covers
// every gateway at once; this is the same view of one gateway, over its HTTP port.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AnyStateMachine } from "xstate";
import type { ClientHandle, ClientRegistry } from "../clients.js";
import { sendJson } from "../http.js";
import type { MachineActor } from "../machineActor.js";
import { type ActorRegistry, configuration } from "../registry.js";

export const DEFAULT_LIMIT = 1024;
export const MAX_LIMIT = 10_000;

export interface ClientView {
  readonly cid: number;
  readonly protocol: "mqtt" | "amqp";
  readonly account: string;
  readonly client_id: string;
  readonly remote: string;
  readonly since: string;
  readonly nats_server: string;
  readonly subscriptions: number;
  /** Of those, how many wait for their stream to answer (stored delivery retrying). */
  readonly stored_waiting: number;
  /** Bytes the gateway holds for the client on their way out (MQTT: within limits.max_client_buffer; AMQP: 0, its bounds are per link). */
  readonly held_bytes: number;
  /** The connection machine's state (docs/statecharts), and since when it is in it. */
  readonly state: string;
  readonly state_since: string | null;
}

export interface ClientsPage {
  readonly id: string;
  readonly now: string;
  /** Clients that match the filters, on every page. */
  readonly total: number;
  readonly offset: number;
  readonly limit: number;
  readonly count: number;
  readonly clients: ClientView[];
}

type Query = { offset: number; limit: number; account?: string; clientId?: string; protocol?: "mqtt" | "amqp" };

/** The query string's filters and page, or why it is wrong. */
export function readQuery(search: URLSearchParams): { ok: true; query: Query } | { ok: false; error: string } {
  const whole = (name: string, fallback: number, max: number) => {
    const text = search.get(name);
    if (text === null || text === "") return fallback;
    const n = Number(text);
    return Number.isSafeInteger(n) && n >= 0 && n <= max ? n : undefined;
  };
  const offset = whole("offset", 0, Number.MAX_SAFE_INTEGER);
  if (offset === undefined) return { ok: false, error: "offset must be a whole number, 0 or more" };
  const limit = whole("limit", DEFAULT_LIMIT, MAX_LIMIT);
  if (limit === undefined || limit === 0)
    return { ok: false, error: `limit must be a whole number from 1 to ${MAX_LIMIT}` };
  const protocol = search.get("protocol") ?? undefined;
  if (protocol !== undefined && protocol !== "mqtt" && protocol !== "amqp")
    return { ok: false, error: "protocol must be mqtt or amqp" };
  const query: Query = { offset, limit };
  const account = search.get("account");
  const clientId = search.get("client_id");
  return {
    ok: true,
    query: {
      ...query,
      ...(account !== null ? { account } : {}),
      ...(clientId !== null ? { clientId } : {}),
      ...(protocol ? { protocol } : {}),
    },
  };
}

/** One page of clients, oldest connection (lowest cid) first. */
export function clientsPage(
  id: string,
  clients: ClientRegistry,
  registry: ActorRegistry,
  query: Query,
  now = new Date(),
): ClientsPage {
  const matching = [...clients.all()]
    .filter(
      (c) =>
        (query.account === undefined || c.account === query.account) &&
        (query.clientId === undefined || c.clientId === query.clientId) &&
        (query.protocol === undefined || c.protocol === query.protocol),
    )
    .sort((a, b) => a.cid - b.cid);
  const page = matching.slice(query.offset, query.offset + query.limit);
  const actors = connectionActors(registry);
  return {
    id,
    now: now.toISOString(),
    total: matching.length,
    offset: query.offset,
    limit: query.limit,
    count: page.length,
    clients: page.map((c) => view(c, actors.get(`${c.protocol}-${c.cid}`), registry)),
  };
}

/** Each client's connection actor by id (`mqtt-<cid>`, `amqp-<cid>`), found in one walk. */
export function connectionActors(registry: ActorRegistry): Map<string, MachineActor<AnyStateMachine>> {
  const out = new Map<string, MachineActor<AnyStateMachine>>();
  for (const machine of ["mqttConnection", "amqpConnection"])
    for (const actor of registry.actorsOf(machine)) out.set(actor.id, actor);
  return out;
}

function view(c: ClientHandle, actor: MachineActor<AnyStateMachine> | undefined, registry: ActorRegistry): ClientView {
  const entered = actor ? registry.enteredAt(actor) : undefined;
  return {
    cid: c.cid,
    protocol: c.protocol,
    account: c.account,
    client_id: c.clientId,
    remote: c.remote,
    since: c.since.toISOString(),
    nats_server: c.natsServer(),
    subscriptions: c.subscriptions?.() ?? 0,
    stored_waiting: c.storedWaiting?.() ?? 0,
    held_bytes: c.heldBytes?.() ?? 0,
    state: actor ? configuration(actor.getSnapshot()) : "",
    state_since: entered === undefined ? null : new Date(entered).toISOString(),
  };
}

export function clientsRoute(id: string, clients: ClientRegistry, registry: ActorRegistry) {
  return (req: IncomingMessage, res: ServerResponse) => {
    const read = readQuery(new URL(req.url ?? "/", "http://localhost").searchParams);
    if (!read.ok) return sendJson(res, 400, { error: read.error });
    sendJson(res, 200, clientsPage(id, clients, registry, read.query));
  };
}
