import type { NatsSeam } from "./client/natsSeam.js";

/**
 * Every connected client of this gateway, whatever its protocol: what `list` shows,
 * what `kick` and lame duck reach, and where a second connection with the same client
 * id finds the one it takes over. Adding a protocol adds entries, not code here.
 */
export interface ClientHandle {
  readonly cid: number;
  readonly protocol: "mqtt" | "amqp";
  readonly clientId: string;
  readonly remote: string;
  readonly since: Date;
  account: string;
  natsServer(): string;
  /** The username the client logged in with (bans match it). */
  readonly username?: string | undefined;
  /** MQTT subscriptions (filters) or AMQP receiving links: read at a metrics scrape. */
  subscriptions?(): number;
  /** What `subscriptions` counts, for admin `subscriptions`: MQTT filters with their QoS, AMQP source addresses. */
  subscriptionList?(): Array<{ filter: string; qos: number | null }>;
  /** MQTT subscriptions whose stored delivery waits for its stream to answer (storedDelivery.ts). */
  storedWaiting?(): number;
  /** Bytes held for the client on their way out: read when /clients is asked. */
  heldBytes?(): number;
  /** The (shared) NATS connection the client rides; admin rebalance moves it. */
  natsConnection?(): NatsSeam;
  kick(): void;
  /** Closed by the gateway itself (lame duck, shutdown). */
  shutdown(): void;
  /**
   * A newer connection claimed the same client id in the same account; `resumed`: it
   * resumes the session (Clean Start 0), when that is known (the will depends on it).
   */
  takeOver(resumed?: boolean): void;
}

export class ClientRegistry {
  private nextCid = 1;
  private readonly byCid = new Map<number, ClientHandle>();
  private readonly byClientId = new Map<string, ClientHandle>();
  private readonly listeners = new Set<(change: "added" | "removed", handle: ClientHandle) => void>();

  allocateCid(): number {
    return this.nextCid++;
  }

  /** Registers a client; returns the one it displaces (same protocol, account and client id). */
  add(handle: ClientHandle): ClientHandle | undefined {
    this.byCid.set(handle.cid, handle);
    this.notify("added", handle);
    if (handle.protocol !== "mqtt") return undefined;
    const key = clientKey(handle.account, handle.clientId);
    const previous = this.byClientId.get(key);
    this.byClientId.set(key, handle);
    return previous;
  }

  remove(handle: ClientHandle): void {
    if (this.byCid.get(handle.cid) === handle) {
      this.byCid.delete(handle.cid);
      this.notify("removed", handle);
    }
    const key = clientKey(handle.account, handle.clientId);
    if (this.byClientId.get(key) === handle) this.byClientId.delete(key);
  }

  get(cid: number): ClientHandle | undefined {
    return this.byCid.get(cid);
  }

  all(): IterableIterator<ClientHandle> {
    return this.byCid.values();
  }

  /** Subscriptions (MQTT filters, AMQP receiving links) by protocol, for mqgw_subscriptions. */
  subscriptionCounts(): Record<string, number> {
    const out = { mqtt: 0, amqp: 0 };
    for (const c of this.byCid.values()) out[c.protocol] += c.subscriptions?.() ?? 0;
    return out;
  }

  /** Stored subscriptions waiting for their stream, for mqgw_stored_waiting. */
  storedWaitingCount(): number {
    let n = 0;
    for (const c of this.byCid.values()) n += c.storedWaiting?.() ?? 0;
    return n;
  }

  byClient(account: string, clientId: string): ClientHandle[] {
    const out: ClientHandle[] = [];
    for (const h of this.byCid.values()) if (h.account === account && h.clientId === clientId) out.push(h);
    return out;
  }

  size(): number {
    return this.byCid.size;
  }

  /** Clients of one account on this gateway (limits.max_connections_per_account). */
  countIn(account: string): number {
    let n = 0;
    for (const h of this.byCid.values()) if (h.account === account) n++;
    return n;
  }

  /** Admin scopes and kicks follow clients coming and going; returns the unsubscribe. */
  onChange(listener: (change: "added" | "removed", handle: ClientHandle) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private notify(change: "added" | "removed", handle: ClientHandle): void {
    for (const l of this.listeners) l(change, handle);
  }
}

const clientKey = (account: string, clientId: string) => `${account}\u0000${clientId}`;
