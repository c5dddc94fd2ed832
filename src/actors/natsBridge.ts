import { createHash } from "node:crypto";
import { type Authenticator, AuthorizationError, connect, type NatsConnection, PermissionViolationError } from "@nats-io/transport-node";
import { Deferred, Effect } from "effect";
import type { Actor } from "xstate";
import type { Logger } from "../log.js";
import { natsConnectionMachine } from "../machines/natsConnection.js";
import { startMachine } from "./machineActor.js";
import type { ActorRegistry } from "./registry.js";
import type { Supervisor } from "./supervisor.js";
import { once } from "./once.js";

/** What a client presents: NATS decides what it may do, the gateway keeps no user list. */
export interface Credentials {
  readonly user?: string | undefined;
  readonly pass?: string | undefined;
  readonly token?: string | undefined;
  /** The gateway's own users may also log in with a creds file or an nkey seed. */
  readonly authenticator?: Authenticator | undefined;
  /** Identifies an authenticator's secret for sharing (a file path), never the secret itself. */
  readonly authenticatorKey?: string | undefined;
}

export type LeaseStatus = "up" | "down";

/** A client's hold on a NATS connection made with its own credentials. */
export interface NatsLease {
  readonly nc: NatsConnection;
  /** The nats-server this connection is on now (its server_name). */
  server(): string;
  connected(): boolean;
  /** Typed status events for the client's machine (NATS_DOWN / NATS_UP). */
  onStatus(listener: (status: LeaseStatus) => void): () => void;
  /** Permission errors the server reported on this connection, by subject. */
  onPermissionError(listener: (subject: string, op: "publish" | "subscribe") => void): () => void;
  release(): void;
}

export class NatsConnectError extends Error {
  constructor(
    message: string,
    readonly auth: boolean,
  ) {
    super(message);
  }
}

interface Shared {
  refs: number;
  ready: Promise<NatsConnection>;
  actor?: Actor<typeof natsConnectionMachine>;
  statusListeners: Set<(s: LeaseStatus) => void>;
  permissionListeners: Set<(subject: string, op: "publish" | "subscribe") => void>;
  released: Deferred.Deferred<void>;
}

export interface NatsBridgeOptions {
  readonly servers: string[];
  readonly gatewayId: string;
  readonly supervisor: Supervisor;
  readonly registry: ActorRegistry;
  readonly log: Logger;
}

/**
 * The NATS bridge: one NATS connection per distinct set of client credentials,
 * reference-counted. Each connection is an actor (natsConnection machine) under the
 * supervisor; when its last client lets go it drains and closes, whatever happened.
 * Sharing keeps NATS-side authorization intact: only clients that presented the very
 * same credentials share a connection, and NATS judges every publish and subscribe.
 */
export class NatsBridge {
  private readonly shared = new Map<string, Shared>();

  constructor(private readonly options: NatsBridgeOptions) {}

  async acquire(creds: Credentials): Promise<NatsLease> {
    const key = credentialKey(creds);
    let entry = this.shared.get(key);
    if (!entry) {
      entry = this.open(key, creds);
      this.shared.set(key, entry);
    }
    entry.refs++;
    const held = entry;
    let nc: NatsConnection;
    try {
      nc = await held.ready;
    } catch (e) {
      this.releaseRef(key, held);
      throw e;
    }
    return {
      nc,
      server: () => nc.info?.server_name ?? "",
      connected: () => held.actor?.getSnapshot().value === "connected",
      onStatus: (l) => {
        held.statusListeners.add(l);
        return () => held.statusListeners.delete(l);
      },
      onPermissionError: (l) => {
        held.permissionListeners.add(l);
        return () => held.permissionListeners.delete(l);
      },
      release: once(() => this.releaseRef(key, held)),
    };
  }

  /** Number of NATS connections open for clients now. */
  connectionCount(): number {
    return this.shared.size;
  }

  private releaseRef(key: string, entry: Shared): void {
    entry.refs--;
    if (entry.refs > 0) return;
    if (this.shared.get(key) === entry) this.shared.delete(key);
    Deferred.doneUnsafe(entry.released, Effect.void);
  }

  private open(key: string, creds: Credentials): Shared {
    const { servers, gatewayId, supervisor, registry, log } = this.options;
    let resolveReady!: (nc: NatsConnection) => void;
    let rejectReady!: (e: Error) => void;
    const entry: Shared = {
      refs: 0,
      ready: new Promise((res, rej) => {
        resolveReady = res;
        rejectReady = rej;
      }),
      statusListeners: new Set(),
      permissionListeners: new Set(),
      released: Deferred.makeUnsafe<void>(),
    };
    entry.ready.catch(() => {});
    const shared = this.shared;
    const connection = Effect.gen(function* () {
      const actor = yield* startMachine(natsConnectionMachine, {
        input: undefined,
        registry,
        on: {
          up: () => {
            for (const l of entry.statusListeners) l("up");
          },
          down: () => {
            for (const l of entry.statusListeners) l("down");
          },
        },
      });
      entry.actor = actor;
      const nc = yield* Effect.tryPromise({
        try: () =>
          connect({
            servers,
            user: creds.user,
            pass: creds.pass,
            token: creds.token,
            ...(creds.authenticator ? { authenticator: creds.authenticator } : {}),
            name: `mq-gateway ${gatewayId}`,
            maxReconnectAttempts: -1,
            reconnectTimeWait: 250,
            noAsyncTraces: true,
            // A client's bad password must fail its CONNECT, not retry forever.
            ignoreAuthErrorAbort: false,
          }),
        catch: (e) => {
          const message = e instanceof Error ? e.message : String(e);
          const auth = e instanceof AuthorizationError || /authoriz|authenticat/i.test(message);
          actor.send({ type: "CONNECT_FAILED", reason: message, auth });
          return new NatsConnectError(message, auth);
        },
      }).pipe(Effect.tapError((e) => Effect.sync(() => rejectReady(e))));
      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          if (!nc.isClosed()) await nc.drain().catch(() => nc.close());
        }),
      );
      actor.send({ type: "CONNECTED", server: nc.info?.server_name ?? "" });
      watchStatus(nc, actor, entry);
      resolveReady(nc);
      // Held until the last client lets go (or the supervisor stops everything).
      yield* Deferred.await(entry.released);
      actor.send({ type: "RELEASE_LAST" });
    }).pipe(
      // A refused connect was already answered through `ready`; it is not a crash.
      Effect.catch((e) => (e instanceof NatsConnectError ? Effect.void : Effect.fail(e))),
      Effect.ensuring(
        Effect.sync(() => {
          if (shared.get(key) === entry) shared.delete(key);
        }),
      ),
    );
    supervisor.spawn(`nats:${key}`, "natsConnection", connection);
    log.debug({ key }, "opening a NATS connection for a new credential set");
    return entry;
  }
}

function watchStatus(nc: NatsConnection, actor: Actor<typeof natsConnectionMachine>, entry: Shared): void {
  void (async () => {
    for await (const s of nc.status()) {
      switch (s.type) {
        case "disconnect":
          actor.send({ type: "DISCONNECTED" });
          break;
        case "reconnect":
          actor.send({ type: "RECONNECTED", server: nc.info?.server_name ?? s.server });
          break;
        case "error": {
          const e = s.error;
          if (e instanceof PermissionViolationError) {
            const op = e.operation === "publish" ? "publish" : "subscribe";
            for (const l of entry.permissionListeners) l(e.subject, op);
          }
          break;
        }
        default:
          break;
      }
    }
  })();
  void nc.closed().then(() => actor.send({ type: "CLOSED" }));
}

/**
 * Admin rebalance: moves one (shared) connection to `url` now, with every client on it.
 * The pool becomes `url` alone for the switch (so the reconnect dials it first), then
 * `url` plus the old pool again, so a later failure can go anywhere. Resolves once the
 * connection is up again, or after `timeoutMs`, with where it is then.
 */
export async function moveConnection(
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
 */
export async function flushAndSettle(nc: NatsConnection): Promise<void> {
  await nc.flush();
  await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Clients with equal credentials share one connection; the key never holds a secret in clear. */
export function credentialKey(creds: Credentials): string {
  if (!creds.user && !creds.pass && !creds.token && !creds.authenticatorKey) return "anonymous";
  return createHash("sha256")
    .update(JSON.stringify([creds.user ?? null, creds.pass ?? null, creds.token ?? null, creds.authenticatorKey ?? null]))
    .digest("hex")
    .slice(0, 24);
}
