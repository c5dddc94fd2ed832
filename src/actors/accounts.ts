import type { RoutingRule } from "../config/schema.js";
import type { NatsSeam } from "./client/natsSeam.js";

/**
 * How the gateway learns a client's account without anything from the client's own
 * permissions beyond what NATS already said (docs/decisions/client-account.md).
 */
export interface AccountLookup {
  /** The accounts the gateway has a user of its own in (gateway_users). */
  readonly gatewayAccounts?: () => readonly string[];
  /** That user's connection, which asks its account's connz for the client's connection. */
  readonly gatewayConnection?: (account: string) => Promise<NatsSeam>;
  /** No way gave the account: the caller says so (once per user) and what the user needs. */
  readonly unknown?: (username: string | undefined) => void;
  /** Which way told it (for the debug log). */
  readonly learnt?: (username: string | undefined, account: string, via: AccountSource) => void;
}

export type AccountSource = "connect_info" | "user_info" | "account_connz";

/**
 * A client's account, in this order: the routing table; what nats-server said of the
 * connection when it took its CONNECT (`remote_account` in the INFO it answers with,
 * nats-server 2.12 and later); what it answers the client's user on `$SYS.REQ.USER.INFO`
 * (older servers, if the user may ask); which gateway user's account lists the connection
 * in its connz (`$SYS.REQ.ACCOUNT.PING.CONNZ`, a service nats-server gives every account);
 * else empty. Answers are cached per connection, since clients that share a connection
 * share its user.
 */
export class AccountResolver {
  private readonly cache = new WeakMap<NatsSeam, Promise<string>>();
  /** The answers learnt so far, for `known`. */
  private readonly learnt = new WeakMap<NatsSeam, string>();

  constructor(
    private readonly rules: () => readonly RoutingRule[],
    private readonly lookup: AccountLookup = {},
  ) {}

  resolve(nats: NatsSeam, username: string | undefined): Promise<string> {
    const routed = this.routed(username);
    if (routed !== undefined) return Promise.resolve(routed);
    let answer = this.cache.get(nats);
    if (!answer) {
      answer = this.learn(nats, username);
      answer.then(
        (account) => this.learnt.set(nats, account),
        () => {},
      );
      this.cache.set(nats, answer);
    }
    return answer;
  }

  /** What `resolve` would answer, when that is known without waiting; undefined else. */
  known(nats: NatsSeam, username: string | undefined): string | undefined {
    return this.routed(username) ?? this.learnt.get(nats);
  }

  /** The routing table's account for the user, if a rule names it. */
  private routed(username: string | undefined): string | undefined {
    if (username === undefined) return undefined;
    for (const rule of this.rules()) if (globMatch(rule.username, username)) return rule.account;
    return undefined;
  }

  private async learn(nats: NatsSeam, username: string | undefined): Promise<string> {
    const ways: Array<[AccountSource, () => Promise<string | undefined>]> = [
      ["connect_info", () => toldAtConnect(nats)],
      ["user_info", () => askUserInfo(nats)],
      ["account_connz", () => this.listedIn(nats)],
    ];
    for (const [via, ask] of ways) {
      const account = await ask();
      if (account === undefined) continue;
      this.lookup.learnt?.(username, account, via);
      return account;
    }
    this.lookup.unknown?.(username);
    return "";
  }

  /** The gateway account whose connz lists this connection (its server id and client id). */
  private async listedIn(nats: NatsSeam): Promise<string | undefined> {
    const { gatewayAccounts, gatewayConnection } = this.lookup;
    const serverId = nats.info()?.server_id;
    const cid = nats.info()?.client_id;
    if (!gatewayAccounts || !gatewayConnection || !serverId || cid === undefined) return undefined;
    const found = await Promise.all(
      gatewayAccounts().map(async (account) => {
        try {
          return (await listsConnection(await gatewayConnection(account), serverId, cid)) ? account : undefined;
        } catch {
          return undefined;
        }
      }),
    );
    return found.find((a) => a !== undefined);
  }
}

/**
 * nats-server 2.12 and later follow the PONG to a client's first PING with an INFO that
 * names the account it bound the connection to (nats-server#6936). The connection is
 * ready at that PONG, so the INFO may not have been read yet: one more PING's PONG comes
 * after it. Read at once: a later INFO (cluster changes) replaces it without repeating it.
 */
async function toldAtConnect(nats: NatsSeam): Promise<string | undefined> {
  const told = () => {
    const info = nats.info() as { connect_info?: boolean; remote_account?: string } | undefined;
    return info?.connect_info && info.remote_account ? info.remote_account : undefined;
  };
  if (told() === undefined) await nats.taken().catch(() => {});
  return told();
}

async function askUserInfo(nats: NatsSeam): Promise<string | undefined> {
  try {
    const reply = await nats.request("$SYS.REQ.USER.INFO", "", 1_000);
    const info = reply.json<{ data?: { account?: string } }>();
    return info.data?.account || undefined;
  } catch {
    // Not allowed to ask, or no system account.
    return undefined;
  }
}

const CONNZ_WAIT_MS = 1_000;

/**
 * Whether the account of `gw` has the connection `cid` on server `serverId`: every server
 * answers the account's connz ping with the account's connections there, filtered by cid
 * (a cid is per server, so only the client's server's answer counts).
 */
async function listsConnection(gw: NatsSeam, serverId: string, cid: number): Promise<boolean> {
  const replies = await gw.gather("$SYS.REQ.ACCOUNT.PING.CONNZ", JSON.stringify({ cid }), CONNZ_WAIT_MS);
  for await (const m of replies) {
    if (m.data.length === 0) continue;
    const r = m.json<{ server?: { id?: string }; data?: { connections?: Array<{ cid?: number }> } }>();
    if (r.server?.id !== serverId) continue;
    return r.data?.connections?.some((c) => c.cid === cid) === true;
  }
  return false;
}

export function globMatch(pattern: string, text: string): boolean {
  const parts = pattern.split("*");
  if (parts.length === 1) return pattern === text;
  let pos = 0;
  for (const [i, part] of parts.entries()) {
    if (i === 0) {
      if (!text.startsWith(part)) return false;
      pos = part.length;
    } else if (i === parts.length - 1) {
      return text.length - pos >= part.length && text.endsWith(part);
    } else {
      const at = text.indexOf(part, pos);
      if (at < 0) return false;
      pos = at + part.length;
    }
  }
  return true;
}
