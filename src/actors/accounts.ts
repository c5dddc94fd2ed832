import type { NatsConnection } from "@nats-io/transport-node";
import type { RoutingRule } from "../config/schema.js";

/**
 * A client's account: the routing table first, else what NATS says of the client's own
 * user ($SYS.REQ.USER.INFO on its connection), else empty. Answers are cached per
 * connection, since clients that share a connection share its user.
 */
export class AccountResolver {
  private readonly cache = new WeakMap<NatsConnection, Promise<string>>();

  constructor(private readonly rules: () => readonly RoutingRule[]) {}

  resolve(nc: NatsConnection, username: string | undefined): Promise<string> {
    if (username !== undefined) {
      for (const rule of this.rules()) if (globMatch(rule.username, username)) return Promise.resolve(rule.account);
    }
    let answer = this.cache.get(nc);
    if (!answer) {
      answer = askUserInfo(nc);
      this.cache.set(nc, answer);
    }
    return answer;
  }
}

async function askUserInfo(nc: NatsConnection): Promise<string> {
  try {
    const reply = await nc.request("$SYS.REQ.USER.INFO", "", { timeout: 1_000 });
    const info = reply.json<{ data?: { account?: string } }>();
    return info.data?.account ?? "";
  } catch {
    // Not allowed to ask, or no system account: the client has an empty account.
    return "";
  }
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
