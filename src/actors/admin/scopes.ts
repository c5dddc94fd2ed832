import type { ClientRegistry } from "../clients.js";
import { isSubjectToken } from "./subjects.js";

/**
 * The accounts this gateway serves, for `$MQG.admin.account.<account>.>`: those it has a
 * gateway user in (config) and those its connected clients are in now. Clients with an
 * empty account (NATS would not say) are reached by the server and ping scopes only.
 * It lives as long as the gateway, as does its watch on the registry.
 */
export class AccountScopes {
  private readonly clientsIn = new Map<string, number>();
  private readonly listeners = new Set<(account: string, served: boolean) => void>();

  constructor(
    clients: ClientRegistry,
    private readonly configured: readonly string[],
  ) {
    for (const c of clients.all()) this.count(c.account, +1);
    clients.onChange((change, handle) => this.count(handle.account, change === "added" ? +1 : -1));
  }

  served(): string[] {
    const all = new Set(this.configured.filter(isSubjectToken));
    for (const account of this.clientsIn.keys()) if (isSubjectToken(account)) all.add(account);
    return [...all].sort();
  }

  isServed(account: string): boolean {
    return isSubjectToken(account) && (this.configured.includes(account) || (this.clientsIn.get(account) ?? 0) > 0);
  }

  /** Called when an account starts or stops being served; returns the unsubscribe. */
  onChange(listener: (account: string, served: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private count(account: string, delta: number): void {
    const before = this.isServed(account);
    const n = (this.clientsIn.get(account) ?? 0) + delta;
    if (n > 0) this.clientsIn.set(account, n);
    else this.clientsIn.delete(account);
    const after = this.isServed(account);
    if (before !== after) for (const l of this.listeners) l(account, after);
  }
}
