import type { NatsLease } from "../client/natsBridge.js";
import type { ClientHandle } from "../clients.js";
import type { ClientSession } from "./session.js";

/**
 * An MQTT client as the client registry (admin, takeover) sees it. A class, so its
 * methods live on the prototype instead of five closures per connection.
 */
export class MqttClientHandle implements ClientHandle {
  readonly protocol = "mqtt" as const;
  private readonly sinceMs = Date.now();

  constructor(
    readonly cid: number,
    /** The CONNECT as the connection read it: its client id and username. */
    private readonly request: { readonly clientId: string; readonly username?: string | undefined },
    readonly remote: string,
    public account: string,
    private readonly lease: NatsLease,
    private readonly actor: {
      send(event: { type: "KICK" | "SHUTDOWN" } | { type: "TAKEN_OVER"; resumed?: boolean | undefined }): void;
    },
    private readonly owner: { readonly session: ClientSession | undefined; readonly bytes: { held(): number } },
  ) {}

  get clientId(): string {
    return this.request.clientId;
  }
  get username(): string | undefined {
    return this.request.username;
  }
  /** What the log says of the client when it is served. */
  described(version: 4 | 5): Record<string, unknown> {
    const { cid, remote, clientId, account, username } = this;
    return { cid, remote, client_id: clientId, account, version: version === 5 ? "5" : "3.1.1", user: username };
  }
  /** A Date made when asked (admin lists): 80 bytes less per connection than keeping one. */
  get since(): Date {
    return new Date(this.sinceMs);
  }
  subscriptions(): number {
    return this.owner.session?.subscriptionCount() ?? 0;
  }
  subscriptionList(): Array<{ filter: string; qos: number | null }> {
    const entries = this.owner.session?.entries.values() ?? [];
    return [...entries].map((e) => ({ filter: e.sub.filter, qos: e.sub.options.qos }));
  }
  storedWaiting(): number {
    return this.owner.session?.storedWaitingCount() ?? 0;
  }
  heldBytes(): number {
    return this.owner.bytes.held();
  }
  natsServer(): string {
    return this.lease.server();
  }
  natsConnection(): NatsLease["nats"] {
    return this.lease.nats;
  }
  kick(): void {
    this.actor.send({ type: "KICK" });
  }
  shutdown(): void {
    this.actor.send({ type: "SHUTDOWN" });
  }
  takeOver(resumed?: boolean): void {
    this.actor.send({ type: "TAKEN_OVER", resumed });
  }
}
