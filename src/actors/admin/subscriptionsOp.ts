import type { ClientHandle } from "../clients.js";

/** At most this many subscriptions in one reply, and no more than fit in one NATS message. */
export const SUBSCRIPTIONS_MAX = 10_000;

export interface SubscriptionEntry {
  readonly cid: number;
  readonly account: string;
  readonly protocol: "mqtt" | "amqp";
  readonly client_id: string;
  readonly filter: string;
  readonly qos: number | null;
}

/**
 * `subscriptions`: the live subscriptions of this gateway's clients, oldest connection
 * first, cut (as `list` is) where the reply would pass one NATS message; `count` is every match.
 */
export function subscriptionsReply(
  id: string,
  clients: Iterable<ClientHandle>,
  filter: { account: string | undefined; clientId: string | undefined },
  maxBytes: number,
): object {
  const matching: SubscriptionEntry[] = [];
  const sorted = [...clients]
    .filter((c) => filter.account === undefined || c.account === filter.account)
    .filter((c) => filter.clientId === undefined || c.clientId === filter.clientId)
    .sort((a, b) => a.cid - b.cid);
  for (const c of sorted)
    for (const s of c.subscriptionList?.() ?? [])
      matching.push({
        cid: c.cid,
        account: c.account,
        protocol: c.protocol,
        client_id: c.clientId,
        filter: s.filter,
        qos: s.qos,
      });
  let size = Buffer.byteLength(JSON.stringify({ id, subscriptions: [], count: matching.length, truncated: false }));
  const listed: SubscriptionEntry[] = [];
  for (const entry of matching) {
    if (listed.length >= SUBSCRIPTIONS_MAX) break;
    const more = Buffer.byteLength(JSON.stringify(entry)) + (listed.length > 0 ? 1 : 0);
    if (size + more > maxBytes) break;
    size += more;
    listed.push(entry);
  }
  return { id, subscriptions: listed, count: matching.length, truncated: listed.length < matching.length };
}
