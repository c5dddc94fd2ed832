import type { ClientRegistry } from "../clients.js";
import type { Metrics } from "../metrics.js";
import type { Credentials, NatsBridge, NatsLease } from "./natsBridge.js";

/** What getting a client onto NATS needs, the same for every door. */
export interface NatsAccessDeps {
  readonly bridge: NatsBridge;
  readonly clients: ClientRegistry;
  readonly metrics: Metrics;
  readonly accountOf: (lease: NatsLease, username: string | undefined) => Promise<string>;
  /** What `accountOf` would answer when it is known without waiting (accounts.ts `known`). */
  readonly accountNow?: (lease: NatsLease, username: string | undefined) => string | undefined;
  /** limits.max_connections_per_account (0: none), counted over both doors. */
  readonly maxConnectionsPerAccount: () => number;
}

/** How a client's NATS access came out; the door turns it into its machine's event. */
export type NatsAccess =
  /** On NATS with its own credentials, in `account`, within the account's limit. */
  | { readonly kind: "acquired"; readonly lease: NatsLease; readonly account: string }
  /** NATS refused the login (`auth`) or could not be reached. */
  | { readonly kind: "refused"; readonly auth: boolean; readonly reason: string }
  /** On NATS, but its account could not be told. */
  | { readonly kind: "no account"; readonly lease: NatsLease; readonly reason: string }
  /** On NATS, but its account has as many connections on this gateway as it may. */
  | { readonly kind: "over limit"; readonly lease: NatsLease; readonly account: string; readonly limit: number }
  /** The client went while NATS answered: the lease is released already. */
  | { readonly kind: "gone" };

/**
 * A client's own NATS connection (shared with clients of the same credentials), its
 * account, and the per-account limit, in that order, for either door: refusals are counted
 * under the door's protocol. A lease returned (acquired, no account, over limit) is the
 * door's to release when its connection ends.
 */
export async function acquireNatsAccess(
  deps: NatsAccessDeps,
  protocol: "mqtt" | "amqp",
  credentials: Credentials,
  username: string | undefined,
  /** False once the client has gone (its machine ended) while NATS answered. */
  wanted: () => boolean,
): Promise<NatsAccess> {
  let lease: NatsLease;
  try {
    lease = await deps.bridge.acquire(credentials);
  } catch (e) {
    const auth = (e as { auth?: boolean }).auth === true;
    deps.metrics.refused(protocol, auth ? "bad_credentials" : "nats_unavailable");
    return { kind: "refused", auth, reason: e instanceof Error ? e.message : String(e) };
  }
  if (!wanted()) {
    lease.release();
    return { kind: "gone" };
  }
  let account: string;
  try {
    account = await deps.accountOf(lease, username);
  } catch (e) {
    return { kind: "no account", lease, reason: e instanceof Error ? e.message : String(e) };
  }
  const limit = limitReached(deps, account);
  if (limit !== undefined) {
    deps.metrics.refused(protocol, "max_connections_per_account");
    return { kind: "over limit", lease, account, limit };
  }
  return { kind: "acquired", lease, account };
}

/**
 * The client's access when nothing needs waiting for: its credentials' connection is up,
 * its account known, and the account under its limit. Undefined otherwise (nothing held
 * then): `acquireNatsAccess` finds out, and says why when it refuses.
 */
export function acquireNatsAccessNow(
  deps: NatsAccessDeps,
  credentials: Credentials,
  username: string | undefined,
): { readonly lease: NatsLease; readonly account: string } | undefined {
  const lease = deps.bridge.acquireNow(credentials);
  if (!lease) return undefined;
  const account = deps.accountNow?.(lease, username);
  // The connection has other clients (it was up): letting this lease go closes nothing.
  if (account === undefined || limitReached(deps, account) !== undefined) return void lease.release();
  return { lease, account };
}

/** limits.max_connections_per_account when the account has that many clients here already. */
function limitReached(deps: NatsAccessDeps, account: string): number | undefined {
  const limit = deps.maxConnectionsPerAccount();
  return limit > 0 && deps.clients.countIn(account) >= limit ? limit : undefined;
}
