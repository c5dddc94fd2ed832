import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import {
  AuthorizationError,
  type ConnectionOptions,
  connect,
  createInbox,
  type Msg,
  type MsgCallback,
  type NatsConnection,
  type Payload,
  PermissionViolationError,
  type PublishOptions,
  type ServerInfo,
  type Subscription,
  type SubscriptionOptions,
} from "@nats-io/transport-node";
import { inboxPrefixOf, installNatsPatches } from "../../vendor/natsjs.js";
import { ConnectionPulls } from "./connectionPulls.js";
import { type JetStreamApiPacer, pacedRequests } from "./jetStreamPacing.js";
import { JetStreamPull, type JetStreamPullOptions, settle } from "./jetStreamPull.js";
import { type CoreInterest, SharedSubscriptions } from "./sharedSubscriptions.js";

/** What a NATS connection tells whoever watches it (the bridge's machine, the admin connection's). */
export interface ConnectionWatcher {
  disconnected?(): void;
  reconnected?(server: string): void;
  /** NATS refused a publish or a subscription of this connection (`-ERR 'Permissions Violation ...'`). */
  permissionDenied?(subject: string, op: "publish" | "subscribe"): void;
  /** Closed for good; `error` when NATS closed it (its user refused twice), not a drain of ours. */
  closed?(error: Error | undefined, auth: boolean): void;
}

/** A subscription whose messages come to a callback (never an async iterator: no loop per subscription). */
export type Delivery = SubscriptionOptions & { readonly callback: MsgCallback<Msg> };

/**
 * The only way code outside src/actors/client reaches NATS (test/layout.test.ts): one per
 * NATS connection, with its operations named by what they are for. The connection itself
 * (`nc`) is for the client modules that speak NATS's own protocols (JetStream pulls, the
 * stored publisher); the doors, the admin side and the services use the operations.
 */
export class NatsSeam {
  private static readonly byConnection = new WeakMap<NatsConnection, NatsSeam>();

  /** The seam of `nc`: one per connection, so it may stand for the connection (a map key). */
  static of(nc: NatsConnection): NatsSeam {
    let seam = NatsSeam.byConnection.get(nc);
    if (!seam) {
      seam = new NatsSeam(nc);
      NatsSeam.byConnection.set(nc, seam);
    }
    return seam;
  }

  /** Its pull engines, told when it goes away and comes back; made with the first. */
  private pulls: ConnectionPulls | undefined;
  /** Its clients' core subscriptions, one SUB per subject; made with the first. */
  private shared: SharedSubscriptions | undefined;

  private constructor(readonly nc: NatsConnection) {}

  /** What the server said of itself and of this connection in its INFO (the one it is on now). */
  info(): ServerInfo | undefined {
    return this.nc.info;
  }

  /** The nats-server this connection is on now (its server_name). */
  serverName(): string {
    return this.nc.info?.server_name ?? "";
  }

  /** The `host:port` this connection is on now, and every one it knows (configured or announced by the cluster). */
  listen(): string {
    return this.nc.getServer();
  }
  pool(): string[] {
    return this.nc.getServers().map((s) => s.listen);
  }

  isClosed(): boolean {
    return this.nc.isClosed();
  }

  /** Calls `watcher` with what happens to the connection from now on, until it closes. */
  watch(watcher: ConnectionWatcher): void {
    const nc = this.nc;
    void (async () => {
      for await (const s of nc.status()) {
        switch (s.type) {
          case "disconnect":
            watcher.disconnected?.();
            break;
          case "reconnect":
            watcher.reconnected?.(nc.info?.server_name ?? s.server);
            break;
          case "error": {
            const e = s.error;
            if (e instanceof PermissionViolationError)
              watcher.permissionDenied?.(e.subject, e.operation === "publish" ? "publish" : "subscribe");
            break;
          }
          default:
            break;
        }
      }
    })();
    void nc.closed().then((e) => {
      // nats.js closes on its own only when NATS refused the user twice in a row
      // (ignoreAuthErrorAbort: false; reconnects are otherwise unlimited): not a drain of ours.
      const error = e instanceof Error ? e : undefined;
      watcher.closed?.(error, error !== undefined && isAuthFailure(error));
    });
  }

  /**
   * Hands one message to NATS, synchronously (the QoS 0 path: nothing more than nats.js's
   * own publish). A refusal comes later, as `permissionDenied`, and is known by `confirm`.
   */
  publish(subject: string, payload?: Payload, options?: Partial<PublishOptions>): void {
    this.nc.publish(subject, payload, options);
  }

  /**
   * NATS's verdict on everything published in this turn of the event loop: resolves once the
   * server answered a PING sent after it and the `permissionDenied` of any refusal among it
   * has been told. Everyone asking in one turn, either door, shares one PING (flushAndSettle).
   * Asked before the turn's first publish (AMQP's publisher), the PING leaves in the same
   * socket write as the publishes (issue 16); asked after (MQTT), it follows them.
   */
  confirm(): Promise<void> {
    return flushAndSettle(this.nc);
  }

  /** Resolves once the server took everything sent before (a PING of its own; backpressure, not a verdict). */
  taken(): Promise<void> {
    return this.nc.flush();
  }

  /** Settles one JetStream delivery (`+ACK`, `-NAK`, ...); a closed connection leaves it to come back after its ack wait. */
  settle(reply: string, body: Uint8Array): void {
    settle(this.nc, reply, body);
  }

  subscribe(subject: string, delivery: Delivery): Subscription {
    return this.nc.subscribe(subject, delivery);
  }

  /**
   * A client's interest in `subject`, on the one SUB every client of this connection shares
   * (sharedSubscriptions.ts): `deliver` hears each message from now until it unsubscribes.
   * A refusal comes as `permissionDenied` to every client, as for a SUB of its own.
   */
  share(subject: string, deliver: (m: Msg) => void): CoreInterest {
    this.shared ??= new SharedSubscriptions(this.nc, () => flushAndSettle(this.nc));
    return this.shared.join(subject, deliver);
  }

  request(subject: string, body: Payload, timeoutMs: number): Promise<Msg> {
    return this.nc.request(subject, body, { timeout: timeoutMs });
  }

  /** Every answer to a request many may answer (a `$SYS` ping each server answers), for `waitMs`. */
  gather(subject: string, body: Payload, waitMs: number): Promise<AsyncIterable<Msg>> {
    return this.nc.requestMany(subject, body, { maxWait: waitMs, strategy: "timer" });
  }

  /** The JetStream and stream-management clients of the connection's account; `pacer` paces their API requests. */
  async jetStream(
    timeoutMs: number,
    pacer?: JetStreamApiPacer,
  ): Promise<{ js: JetStreamClient; jsm: JetStreamManager }> {
    const nc = pacer ? pacedRequests(this.nc, pacer) : this.nc;
    return { js: jetstream(nc, { timeout: timeoutMs }), jsm: await jetstreamManager(nc, { timeout: timeoutMs }) };
  }

  /** A pull engine on `stream`/`consumer` over this connection (client/jetStreamPull.ts). */
  pull(options: Omit<JetStreamPullOptions, "nc" | "connection">): JetStreamPull {
    this.pulls ??= new ConnectionPulls((w) => this.watch(w));
    return new JetStreamPull({ ...options, nc: this.nc, connection: this.pulls });
  }

  /** Admin rebalance: moves the connection, with every client on it, to `url` (moveConnection). */
  moveTo(url: string, timeoutMs: number): Promise<{ server: string; listen: string; reconnected: boolean }> {
    return moveConnection(this.nc, url, timeoutMs);
  }

  /** Ends the connection: drained (what was sent is delivered, subscriptions end) or closed at once. */
  async close(drain: boolean): Promise<void> {
    const nc = this.nc;
    if (nc.isClosed()) return;
    await (drain ? nc.drain() : nc.close()).catch(() => nc.close().catch(() => {}));
  }
}

/** A connection of the gateway's own making outside the bridge (the admin connection), with nats.js's patches in. */
export async function dial(options: ConnectionOptions): Promise<NatsSeam> {
  installNatsPatches();
  return NatsSeam.of(await connect(options));
}

/** nats.js's error for a refused login, or one that says so. */
export function isAuthFailure(e: unknown): boolean {
  return (
    e instanceof AuthorizationError || (e instanceof Error && /authoriz|authenticat|revoked|expired/i.test(e.message))
  );
}

/**
 * Admin rebalance: moves one (shared) connection to `url` now, with every client on it.
 * The pool becomes `url` alone for the switch (so the reconnect dials it first), then
 * `url` plus the old pool again, so a later failure can go anywhere. Resolves once the
 * connection is up again, or after `timeoutMs`, with where it is then.
 */
async function moveConnection(
  nc: NatsConnection,
  url: string,
  timeoutMs: number,
): Promise<{ server: string; listen: string; reconnected: boolean }> {
  const before = nc.getServers().map((s) => s.listen);
  const status = nc.status();
  try {
    nc.setServers([url]);
    const reconnected = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      void (async () => {
        for await (const s of status) {
          if (s.type === "reconnect") break;
        }
        clearTimeout(timer);
        resolve(true);
      })();
    });
    await nc.reconnect();
    const ok = await reconnected;
    return { server: nc.info?.server_name ?? "", listen: nc.getServer(), reconnected: ok };
  } finally {
    (status as { stop?: () => void }).stop?.();
    if (!nc.isClosed()) nc.setServers([...new Set([url, ...before])]);
  }
}

/**
 * Flush, then let the bridge's status watcher run: a -ERR for what was sent arrives before
 * the flush's PONG, but nats.js reports it through an async iterator one turn later.
 *
 * Everything that asks in one turn of the event loop (one batch of socket reads) shares
 * one PING, sent when the turn's synchronous work is done, so it follows every publish of
 * that turn: a QoS 1 publish asked for a PING of its own, a socket write and a server
 * round of work each. Measured on the QoS 1 rows of
 * the bench (docs/decisions/mqtt-store.md): 18k -> 28-38k msgs/s, 35-43 -> 16-22 µs gateway
 * CPU and 22 -> 12-14 µs nats-server CPU per message.
 */
function flushAndSettle(nc: NatsConnection): Promise<void> {
  let shared = turnFlush.get(nc);
  if (shared) return shared;
  // A microtask, not a later macrotask: the PING must go out on the transport that took
  // the publishes it vouches for (nats.js writes them in a microtask too, queued first); a
  // reconnect in between would let a PONG from the new server acknowledge publishes lost
  // with the old one.
  shared = Promise.resolve()
    .then(() => {
      // From here on a caller needs a PING after its own publish: a new one.
      turnFlush.delete(nc);
      return nc.flush();
    })
    .then(() => new Promise<void>((resolve) => setImmediate(resolve)));
  turnFlush.set(nc, shared);
  return shared;
}
const turnFlush = new WeakMap<NatsConnection, Promise<void>>();

/** A new reply subject under the connection's own inbox prefix (vendor/natsjs.ts reads it). */
export function inboxOf(nc: NatsConnection): string {
  return createInbox(inboxPrefixOf(nc));
}
