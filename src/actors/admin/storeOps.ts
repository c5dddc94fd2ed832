// The admin ops on what NATS keeps for the gateways and on live subscriptions (issue 25):
// sessions (list, show, drop), subscriptions, retained messages (list, clear) and bans.
// Each store op is an actor (storeTask.ts, sessionDrop.ts) answering once.
import { parseDuration } from "../../config/units.js";
import type { AccountServices } from "../accountServices.js";
import type { KvSessionStore } from "../mqtt/kvSessionStore.js";
import { addressBlock, type BanKind } from "./banList.js";
import type { Bans } from "./bans.js";
import type { AdminOp, AdminRequest } from "./requests.js";
import { retainedClearReply, retainedReply, retainedSubjects } from "./retainedOps.js";
import { sessionDropActor } from "./sessionDrop.js";
import { sessionShowReply, sessionsReply } from "./sessions.js";
import { STORE_TIMEOUT_MS, storeTask } from "./storeTask.js";
import { subscriptionsReply } from "./subscriptionsOp.js";

/** What the store ops reach: each account's JetStream, the sessions bucket, the bans bucket. */
export interface StoreDeps {
  readonly services: AccountServices;
  readonly sessions: KvSessionStore;
  readonly bans: Bans;
  /** Whether the gateway has gateway users (accounts named in the config). */
  readonly accountsNamed: () => boolean;
  /** A request on the admin connection (session drop asks the session's gateway to kick). */
  readonly adminRequest: (subject: string, body: object, timeoutMs: number) => Promise<Record<string, unknown>>;
}

// Actor ids under the supervisor; one per request.
let tasks = 0;

/** Runs one store request as an actor; its outcome is the reply, or `{"id", "error"}`. */
function task(r: AdminRequest, op: string, work: (store: StoreDeps) => Promise<object>): void {
  const store = r.deps.store;
  if (!store) return r.error(`${op} needs the gateway's NATS accounts, which this gateway does not reach`);
  r.deps.supervisor.spawn(
    `admin-${op}:${++tasks}`,
    "adminStoreRequest",
    storeTask(
      () => work(store),
      r.deps.registry,
      (outcome) => {
        if (outcome.ok) r.reply(outcome.reply);
        else {
          r.deps.log.warn({ op, err: outcome.reason }, "admin request failed");
          r.error(outcome.reason);
        }
      },
    ),
  );
}

/**
 * The account a store op works in: the account scope's, else the request's, else the only
 * one this gateway serves ("" in the single-account case: the gateway's own connection).
 */
function accountOf(r: AdminRequest): string | undefined {
  const { account } = r.body;
  if (account !== undefined && typeof account !== "string") return void r.error("account must be a string");
  if (r.scope.kind === "account") {
    if (account !== undefined && account !== r.scope.account)
      return void r.error(`this is the scope of account ${r.scope.account}, not ${account}`);
    return r.scope.account;
  }
  if (account !== undefined) return account;
  const served = r.deps.servedAccounts();
  if (served.length === 1) return served[0];
  if (served.length === 0 && !r.deps.store?.accountsNamed()) return "";
  return void r.error(`name the account: this gateway serves ${served.length === 0 ? "none yet" : served.join(", ")}`);
}

function stringField(r: AdminRequest, name: string, required: boolean): string | undefined | null {
  const v = r.body[name];
  if (v === undefined && !required) return undefined;
  if (typeof v !== "string" || v === "") {
    r.error(`${name} must be a non-empty string`);
    return null;
  }
  return v;
}

/** A ban's target: exactly one of client_id, username, address (checked). */
function banTarget(r: AdminRequest): { kind: BanKind; value: string } | undefined {
  const given = (["client_id", "username", "address"] as const).filter((k) => r.body[k] !== undefined);
  if (given.length !== 1) return void r.error("name exactly one of client_id, username, address");
  const kind = given[0]!;
  const value = stringField(r, kind, true);
  if (!value) return undefined;
  if (kind === "address") {
    const block = addressBlock(value);
    if (typeof block === "string") return void r.error(block);
  }
  return { kind, value };
}

export const STORE_OPS: Record<string, AdminOp> = {
  sessions: {
    scopes: ["server", "account"],
    serve: (r) => {
      const account = accountOf(r);
      const clientId = stringField(r, "client_id", false);
      if (account === undefined || clientId === null) return;
      task(r, "sessions", (s) => sessionsReply(s.services, r.deps.id, account, clientId, r.deps.maxPayload()));
    },
  },
  "sessions.show": {
    scopes: ["server", "account"],
    serve: (r) => {
      const account = accountOf(r);
      const clientId = stringField(r, "client_id", true);
      if (account === undefined || !clientId) return;
      task(r, "sessions.show", (s) => sessionShowReply(s.services, r.deps.id, account, clientId));
    },
  },
  "sessions.drop": {
    scopes: ["server"],
    serve: (r) => {
      const account = accountOf(r);
      const clientId = stringField(r, "client_id", true);
      if (account === undefined || !clientId) return;
      const store = r.deps.store;
      if (!store) return r.error("sessions.drop needs the gateway's NATS accounts");
      const { deps } = r;
      deps.supervisor.spawn(
        `admin-drop:${++tasks}`,
        "adminSessionDrop",
        sessionDropActor(
          account,
          clientId,
          {
            id: deps.id,
            services: store.services,
            store: store.sessions,
            clients: deps.clients,
            registry: deps.registry,
            log: deps.log,
            adminRequest: store.adminRequest,
            timeoutMs: STORE_TIMEOUT_MS,
          },
          (reply) => {
            deps.log.info({ account, client_id: clientId, ...reply }, "admin session drop");
            r.reply({ id: deps.id, ...reply });
          },
        ),
      );
    },
  },
  subscriptions: {
    scopes: ["server", "ping", "account"],
    serve: (r) => {
      const account = r.scope.kind === "account" ? r.scope.account : stringField(r, "account", false);
      const clientId = stringField(r, "client_id", false);
      if (account === null || clientId === null) return;
      if (r.scope.kind === "account" && r.body.account !== undefined && r.body.account !== account)
        return r.error(`this is the scope of account ${account}, not ${String(r.body.account)}`);
      r.reply(subscriptionsReply(r.deps.id, r.deps.clients.all(), { account, clientId }, r.deps.maxPayload()));
    },
  },
  retained: {
    scopes: ["server", "account"],
    serve: (r) => {
      const account = accountOf(r);
      const filter = stringField(r, "filter", false);
      if (account === undefined || filter === null) return;
      const subjects = retainedSubjects(filter ?? "#");
      if (!subjects.ok) return r.error(subjects.error);
      task(r, "retained", (s) => retainedReply(s.services, r.deps.id, account, subjects.subjects));
    },
  },
  "retained.clear": {
    scopes: ["server"],
    serve: (r) => {
      const account = accountOf(r);
      const filter = stringField(r, "filter", true);
      if (account === undefined || !filter) return;
      const subjects = retainedSubjects(filter);
      if (!subjects.ok) return r.error(subjects.error);
      task(r, "retained.clear", async (s) => {
        const reply = await retainedClearReply(s.services, r.deps.id, account, subjects.subjects);
        r.deps.log.info({ account, filter, ...reply }, "admin retained clear");
        return reply;
      });
    },
  },
  ban: {
    scopes: ["server"],
    serve: (r) => {
      const target = banTarget(r);
      const reason = stringField(r, "reason", false);
      if (!target || reason === null) return;
      let forMs: number | undefined;
      if (r.body.for !== undefined) {
        const d = parseDuration(r.body.for);
        if (!d.ok || d.value <= 0) return r.error(`for: ${d.ok ? "must be longer than 0" : d.error}`);
        forMs = d.value;
      }
      task(r, "ban", async (s) => {
        const ban = await s.bans.ban(target.kind, target.value, reason, forMs);
        r.deps.log.info({ ban }, "admin ban");
        return { id: r.deps.id, banned: true, ban };
      });
    },
  },
  unban: {
    scopes: ["server"],
    serve: (r) => {
      const target = banTarget(r);
      if (!target) return;
      task(r, "unban", async (s) => {
        const unbanned = await s.bans.unban(target.kind, target.value);
        r.deps.log.info({ ...target, unbanned }, "admin unban");
        return { id: r.deps.id, unbanned };
      });
    },
  },
  bans: {
    scopes: ["server"],
    serve: (r) => task(r, "bans", async (s) => ({ id: r.deps.id, bans: await s.bans.all() })),
  },
};
