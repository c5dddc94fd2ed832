import { BlockList, isIP } from "node:net";

/** What a ban keys on (docs/decisions/bans.md). */
export type BanKind = "client_id" | "username" | "address";

/** One ban as kept in the bans bucket and shown by `bans`. */
export interface Ban {
  readonly kind: BanKind;
  /** A client id, a username, or an IP address or CIDR block. */
  readonly value: string;
  readonly reason?: string | undefined;
  /** RFC 3339. */
  readonly since: string;
  /** RFC 3339; absent: until unbanned. */
  readonly until?: string | undefined;
}

/** Who connects, as far as a ban can tell: the address is the socket's `host:port` (listeners.ts remoteOf). */
export interface Visitor {
  readonly clientId?: string | undefined;
  readonly username?: string | undefined;
  readonly remote: string;
}

/** Refuses banned clients at CONNECT / open; the doors ask it (mqtt/natsForConnect.ts, amqp/connection.ts). */
export interface BanCheck {
  /** Why the visitor is refused, or undefined when no ban in force matches it. */
  refusal(visitor: Visitor): string | undefined;
}

/** KV keys allow `[-/_=.a-zA-Z0-9]`: the value is base64url, after a token for its kind. */
export function banKey(kind: BanKind, value: string): string {
  return `${kind}.${Buffer.from(value, "utf8").toString("base64url") || "_"}`;
}

/** The address part of `host:port` or `[v6]:port`, with an IPv4-mapped IPv6 address as IPv4. */
export function hostOf(remote: string): string {
  const host = remote.startsWith("[") ? remote.slice(1, remote.indexOf("]")) : remote.slice(0, remote.lastIndexOf(":"));
  return host.startsWith("::ffff:") && isIP(host.slice(7)) === 4 ? host.slice(7) : host;
}

/** An address ban's block, or why the value is not an IP address or CIDR block. */
export function addressBlock(value: string): BlockList | string {
  const [address = "", prefix, ...rest] = value.split("/");
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return `${JSON.stringify(value)} is not an IP address or CIDR block`;
  const bits = prefix === undefined ? (family === 4 ? 32 : 128) : Number(prefix);
  if (!Number.isInteger(bits) || bits < 0 || bits > (family === 4 ? 32 : 128))
    return `${JSON.stringify(value)}: the prefix length must be 0 to ${family === 4 ? 32 : 128}`;
  const block = new BlockList();
  block.addSubnet(address, bits, family === 4 ? "ipv4" : "ipv6");
  return block;
}

interface Entry {
  readonly ban: Ban;
  readonly untilMs: number;
  readonly block: BlockList | undefined;
}

/**
 * The bans in force, as this gateway last heard them from the bans bucket (bans.ts keeps
 * it in step). Checked at every CONNECT and AMQP open, so a lookup is a map read (client
 * id, username) or one walk over the address bans. An expired ban stops matching at its
 * `until`, whether or not the bucket has dropped it yet.
 */
export class BanList implements BanCheck {
  private readonly entries = new Map<string, Entry>();
  private readonly listeners = new Set<(ban: Ban) => void>();

  set(key: string, ban: Ban | undefined): void {
    if (!ban) {
      this.entries.delete(key);
      return;
    }
    const block = ban.kind === "address" ? addressBlock(ban.value) : undefined;
    if (typeof block === "string") return;
    this.entries.set(key, { ban, untilMs: ban.until ? Date.parse(ban.until) : Number.POSITIVE_INFINITY, block });
    if (Date.now() < (this.entries.get(key)?.untilMs ?? 0)) for (const l of this.listeners) l(ban);
  }

  clear(): void {
    this.entries.clear();
  }

  refusal(visitor: Visitor): string | undefined {
    if (this.entries.size === 0) return undefined;
    const now = Date.now();
    const inForce = (key: string) => {
      const e = this.entries.get(key);
      return e && now < e.untilMs ? e.ban : undefined;
    };
    const ban =
      (visitor.clientId !== undefined ? inForce(banKey("client_id", visitor.clientId)) : undefined) ??
      (visitor.username !== undefined ? inForce(banKey("username", visitor.username)) : undefined) ??
      this.byAddress(visitor.remote, now);
    return ban ? describe(ban) : undefined;
  }

  /** The bans in force now, oldest first. */
  inForce(): Ban[] {
    const now = Date.now();
    return [...this.entries.values()]
      .filter((e) => now < e.untilMs)
      .map((e) => e.ban)
      .sort((a, b) => a.since.localeCompare(b.since));
  }

  /** Hears each ban that comes into force (the gateway kicks the clients it matches). */
  onBan(listener: (ban: Ban) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private byAddress(remote: string, now: number): Ban | undefined {
    const host = hostOf(remote);
    const family = isIP(host);
    if (family === 0) return undefined;
    for (const e of this.entries.values())
      if (e.block && now < e.untilMs && e.block.check(host, family === 4 ? "ipv4" : "ipv6")) return e.ban;
    return undefined;
  }
}

/** Which visitors one ban matches (the connected clients, when it comes into force). */
export function banMatcher(ban: Ban): (visitor: Visitor) => boolean {
  const list = new BanList();
  list.set(banKey(ban.kind, ban.value), ban);
  return (visitor) => list.refusal(visitor) !== undefined;
}

function describe(ban: Ban): string {
  const what =
    ban.kind === "address" ? `address ${ban.value}` : `${ban.kind.replace("_", " ")} ${JSON.stringify(ban.value)}`;
  return `banned (${what}${ban.until ? ` until ${ban.until}` : ""}${ban.reason ? `: ${ban.reason}` : ""})`;
}
