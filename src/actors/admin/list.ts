import type { ClientHandle } from "../clients.js";

/** admin-subjects.md: "The reply holds at most 10,000 clients, and no more than fit in one NATS message." */
export const LIST_MAX_CLIENTS = 10_000;

export interface ListEntry {
  readonly cid: number;
  readonly account: string;
  readonly protocol: "mqtt" | "amqp";
  readonly client_id: string;
  readonly remote: string;
  readonly since: string;
  readonly nats_server: string;
}

export interface ListReply {
  readonly id: string;
  readonly clients: ListEntry[];
  /** Every client that matched on this gateway, listed or not. */
  readonly count: number;
  readonly truncated: boolean;
}

/**
 * `list`, oldest connections first, cut where the next entry would push the encoded reply
 * past `maxBytes` (the server's max_payload): JSON.stringify writes no spaces, so the
 * reply's size is the empty reply's plus each entry's and a comma between entries.
 */
export function listReply(
  id: string,
  clients: Iterable<ClientHandle>,
  account: string | undefined,
  maxBytes: number,
): ListReply {
  const matching = [...clients]
    .filter((c) => account === undefined || c.account === account)
    .sort((a, b) => a.cid - b.cid);
  const count = matching.length;
  // `false` is the longer of the two, so the budget holds whichever is sent.
  let size = byteLength({ id, clients: [], count, truncated: false });
  const listed: ListEntry[] = [];
  for (const c of matching) {
    if (listed.length >= LIST_MAX_CLIENTS) break;
    const entry = entryOf(c);
    const more = byteLength(entry) + (listed.length > 0 ? 1 : 0);
    if (size + more > maxBytes) break;
    size += more;
    listed.push(entry);
  }
  return { id, clients: listed, count, truncated: listed.length < count };
}

function entryOf(c: ClientHandle): ListEntry {
  return {
    cid: c.cid,
    account: c.account,
    protocol: c.protocol,
    client_id: c.clientId,
    remote: c.remote,
    since: c.since.toISOString(),
    nats_server: c.natsServer(),
  };
}

const byteLength = (value: unknown) => Buffer.byteLength(JSON.stringify(value));
