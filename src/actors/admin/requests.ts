import type { Msg } from "@nats-io/transport-node";
import type { Logger } from "../../log.js";
import type { ClientRegistry } from "../clients.js";
import type { Metrics } from "../metrics.js";
import { once } from "../once.js";
import type { ActorRegistry } from "../registry.js";
import type { Supervisor } from "../supervisor.js";
import { infoReply } from "./info.js";
import { type KickReply, kickActor, kickTarget } from "./kick.js";
import type { LdmReply } from "./ldm.js";
import { listReply } from "./list.js";
import { type RebalanceReply, type RebalanceRequest, rebalanceRequest } from "./rebalanceRequest.js";
import { STORE_OPS, type StoreDeps } from "./storeOps.js";
import { type AdminScope, parseAdminSubject, type ScopeKind, serverScopeOf } from "./subjects.js";

/** What the admin ops read and act on; the admin connection hands each request here. */
export interface AdminDeps {
  readonly id: string;
  /** The primary's id when this gateway is one of its workers. */
  readonly group?: string | undefined;
  readonly version: string;
  readonly since: Date;
  readonly clients: ClientRegistry;
  readonly registry: ActorRegistry;
  readonly supervisor: Supervisor;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly servedAccounts: () => readonly string[];
  /** The largest message the admin connection may publish (the server's max_payload). */
  readonly maxPayload: () => number;
  readonly lameDuck: () => LdmReply;
  readonly rebalance: (request: RebalanceRequest) => RebalanceReply;
  readonly kickTimeoutMs: number;
  /** Sessions, retained messages and bans; absent where the gateway reaches no NATS account (units). */
  readonly store?: StoreDeps | undefined;
}

export interface AdminRequest {
  readonly scope: AdminScope;
  readonly body: Record<string, unknown>;
  readonly deps: AdminDeps;
  /** Sends the reply; each op answers exactly once. */
  readonly reply: (body: object) => void;
  readonly error: (message: string) => void;
}

// Kick actors need distinct supervisor ids; a kick lives only as long as its request.
let kicks = 0;

export interface AdminOp {
  readonly scopes: readonly ScopeKind[];
  readonly serve: (r: AdminRequest) => void;
}

/** The spec's operation table: where each op is served, and how. */
const OPS: Record<string, AdminOp> = {
  info: {
    scopes: ["server", "ping", "account"],
    serve: ({ scope, deps, reply }) => reply(infoReply(deps, scope, deps.clients.all(), deps.servedAccounts())),
  },
  list: {
    scopes: ["server", "ping", "account"],
    serve: ({ scope, body, deps, reply, error }) => {
      const { account } = body;
      if (account !== undefined && typeof account !== "string") return error("account must be a string");
      if (scope.kind === "account" && account !== undefined && account !== scope.account)
        return error(`this is the scope of account ${scope.account}, not ${account}`);
      const filter = scope.kind === "account" ? scope.account : account;
      reply(listReply(deps.id, deps.clients.all(), filter, deps.maxPayload()));
    },
  },
  kick: {
    scopes: ["server", "account"],
    serve: ({ scope, body, deps, reply, error }) => {
      const parsed = kickTarget(scope, body, serverScopeOf(deps.id));
      if (parsed.kind === "error") return error(parsed.message);
      const answer = (r: KickReply) => reply({ id: deps.id, ...r });
      if (parsed.kind === "refused") return answer({ kicked: false, reason: parsed.reason });
      deps.supervisor.spawn(
        `admin-kick:${++kicks}`,
        "adminKick",
        kickActor(
          parsed.target,
          { clients: deps.clients, registry: deps.registry, timeoutMs: deps.kickTimeoutMs },
          (r) => {
            deps.log.info({ target: parsed.target, ...r }, "admin kick");
            answer(r);
          },
        ),
      );
    },
  },
  rebalance: {
    scopes: ["server"],
    serve: ({ body, deps, reply, error }) => {
      const parsed = rebalanceRequest(body);
      if (!parsed.ok) return error(parsed.error);
      const answer = deps.rebalance(parsed.value);
      deps.log.info({ request: parsed.value, ...answer }, "admin rebalance");
      reply(answer);
    },
  },
  ldm: {
    scopes: ["server"],
    serve: ({ deps, reply }) => {
      const answer = deps.lameDuck();
      deps.log.info(answer, "admin ldm");
      reply(answer);
    },
  },
  ...STORE_OPS,
};

/** Every op with each scope that serves it, for the metrics' zeros at start. */
export const ADMIN_OP_SCOPES: ReadonlyArray<readonly [string, ScopeKind]> = Object.entries(OPS).flatMap(([op, spec]) =>
  spec.scopes.map((scope) => [op, scope] as const),
);

/** Answers one admin request: every request with a reply subject gets exactly one JSON reply. */
export function serveAdminRequest(msg: Msg, deps: AdminDeps): void {
  const respond = once((scope: string, op: string, outcome: string, body: object) => {
    deps.metrics.adminRequest(op, scope, outcome);
    if (msg.reply) msg.respond(JSON.stringify(body));
  });
  const parsed = parseAdminSubject(msg.subject);
  if (!parsed) {
    respond("unknown", "unknown", "error", { id: deps.id, error: `not an admin subject: ${msg.subject}` });
    return;
  }
  const { scope, op } = parsed;
  const known = Object.hasOwn(OPS, op) ? op : "unknown";
  const error = (message: string) => respond(scope.kind, known, "error", { id: deps.id, error: message });
  const problem = requestProblem(scope.kind, op);
  const body = parseBody(msg.data);
  if (problem !== undefined) error(problem);
  else if (!body.ok) error(body.error);
  else {
    try {
      OPS[op]?.serve({ scope, body: body.value, deps, reply: (b) => respond(scope.kind, op, "ok", b), error });
    } catch (e) {
      deps.log.error({ op, err: (e as Error).message }, "admin request failed");
      error(`internal error: ${(e as Error).message}`);
    }
  }
}

/** Why an op cannot be served on a scope, if it cannot. */
function requestProblem(scope: ScopeKind, op: string): string | undefined {
  const spec = Object.hasOwn(OPS, op) ? OPS[op] : undefined;
  if (!spec) return `unknown op ${JSON.stringify(op)}: the ops are ${Object.keys(OPS).join(", ")}`;
  if (spec.scopes.includes(scope)) return undefined;
  const plural = spec.scopes.length > 1 ? "s" : "";
  return `${op} is not served on the ${scope} scope, only on the ${spec.scopes.join(" and ")} scope${plural}`;
}

/** Empty means `{}`; anything else must be one JSON object. */
function parseBody(data: Uint8Array): { ok: true; value: Record<string, unknown> } | { ok: false; error: string } {
  const text = new TextDecoder().decode(data).trim();
  if (text === "") return { ok: true, value: {} };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { ok: false, error: `the request is not JSON: ${(e as Error).message}` };
  }
  if (value === null || typeof value !== "object" || Array.isArray(value))
    return { ok: false, error: "the request must be a JSON object" };
  return { ok: true, value: value as Record<string, unknown> };
}
