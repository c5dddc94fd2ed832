import type { ClientHandle } from "../clients.js";
import type { AdminScope } from "./subjects.js";

export interface InfoReply {
  readonly id: string;
  readonly version: string;
  readonly since: string;
  readonly accounts: Record<string, { mqtt: number; amqp: number }>;
  /** Under `run --workers`, the primary's id, shared by its workers: ctl addresses them as one. */
  readonly group?: string;
}

/**
 * `info`: client counts per account in scope. Served accounts with no client show as
 * zeros, so an operator sees which gateways would take clients of an account.
 */
export function infoReply(
  gateway: { id: string; version: string; since: Date; group?: string | undefined },
  scope: AdminScope,
  clients: Iterable<ClientHandle>,
  served: readonly string[],
): InfoReply {
  const accounts: Record<string, { mqtt: number; amqp: number }> = {};
  const inScope = (account: string) => scope.kind !== "account" || account === scope.account;
  const entry = (account: string) => {
    accounts[account] ??= { mqtt: 0, amqp: 0 };
    return accounts[account];
  };
  for (const account of scope.kind === "account" ? [scope.account] : served) entry(account);
  for (const c of clients) if (inScope(c.account)) entry(c.account)[c.protocol]++;
  const group = gateway.group === undefined ? {} : { group: gateway.group };
  return { id: gateway.id, version: gateway.version, since: gateway.since.toISOString(), accounts, ...group };
}
