import { createHash } from "node:crypto";
import {
  type Authenticator,
  AuthorizationError,
  connect,
  createInbox,
  jwtAuthenticator,
  type NatsConnection,
  PermissionViolationError,
  type TlsOptions,
} from "@nats-io/transport-node";
import { Deferred, Effect } from "effect";
import type { Logger } from "../log.js";
import { natsConnectionMachine } from "../machines/natsConnection.js";
import { clientInboxPrefix, gatewayInboxPrefix } from "../protocol/deliveryGuard.js";
import type { LoginCredentials } from "../protocol/natsLogin.js";
import { inboxPrefixOf, installNatsPatches } from "../vendor/natsjs.js";
import type { MachineActor } from "./machineActor.js";
import { startMachine } from "./machineActor.js";
import type { ActorRegistry } from "./registry.js";
import type { Supervisor } from "./supervisor.js";

/** What a client presents: NATS decides what it may do, the gateway keeps no user list. */
export interface Credentials {
  readonly user?: string | undefined;
  readonly pass?: string | undefined;
  readonly token?: string | undefined;
  /** A NATS user JWT presented alone (bearer), as an operator-mode client's password (protocol/natsLogin.ts). */
  readonly jwt?: string | undefined;
  /** The gateway's own users may also log in with a creds file or an nkey seed. */
  readonly authenticator?: Authenticator | undefined;
  /** Identifies an authenticator's secret for sharing (a file path), never the secret itself. */
  readonly authenticatorKey?: string | undefined;
}

export type LeaseStatus = "up" | "down";

/**
 * Whose connection it is (docs/decisions/trust-model.md). `client`: made with a client's
 * credentials, shared by the clients that present the same ones. `gateway`: the
 * gateway's own (a gateway user, the single-account core connection), never shared with
 * clients even when the credentials are equal (both anonymous, say), so no client
 * subscription on it sees the gateway's replies.
 */
export type ConnectionRole = "client" | "gateway";

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
  /**
   * The connection is gone for good: NATS no longer takes its user (removed on a config
   * reload, revoked or expired in operator mode: `auth`), or it closed otherwise. The
   * clients on it must end; a new acquire makes a new connection.
   */
  onGone(listener: (reason: string, auth: boolean) => void): () => void;
  /** All three at once, as methods of one object (a client connection hears them all): no closure per event. */
  listen(listener: LeaseListener): void;
  unlisten(listener: LeaseListener): void;
  release(): void;
}

/** What the holder of a lease hears of its connection (NatsLease `listen`). */
export interface LeaseListener {
  natsStatus?(status: LeaseStatus): void;
  natsPermissionError?(subject: string, op: "publish" | "subscribe"): void;
  natsGone?(reason: string, auth: boolean): void;
}

/**
 * One client's hold on a shared connection. A class, not an object of closures: every MQTT
 * and AMQP connection holds one (it was seven closures and their context).
 */
class Lease implements NatsLease {
  /** Undefined once released: a second release does nothing. */
  private holding: Shared | undefined;

  constructor(
    readonly nc: NatsConnection,
    private readonly entry: Shared,
    private readonly bridge: NatsBridge,
    private readonly key: string,
  ) {
    this.holding = entry;
  }

  server(): string {
    return this.nc.info?.server_name ?? "";
  }

  connected(): boolean {
    return this.entry.actor?.getSnapshot().value === "connected";
  }

  onStatus(natsStatus: (status: LeaseStatus) => void): () => void {
    return this.listenOnce({ natsStatus });
  }

  onPermissionError(natsPermissionError: (subject: string, op: "publish" | "subscribe") => void): () => void {
    return this.listenOnce({ natsPermissionError });
  }

  onGone(natsGone: (reason: string, auth: boolean) => void): () => void {
    return this.listenOnce({ natsGone });
  }

  listen(listener: LeaseListener): void {
    this.entry.listeners.add(listener);
  }

  unlisten(listener: LeaseListener): void {
    this.entry.listeners.delete(listener);
  }

  release(): void {
    const held = this.holding;
    this.holding = undefined;
    if (held) this.bridge.releaseRef(this.key, held);
  }

  private listenOnce(listener: LeaseListener): () => void {
    this.listen(listener);
    return () => this.unlisten(listener);
  }
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
  /** Once connected: its server pool is where new connections dial too (pool()). */
  nc?: NatsConnection;
  actor?: MachineActor<typeof natsConnectionMachine>;
  listeners: Set<LeaseListener>;
  released: Deferred.Deferred<void>;
}

export interface NatsBridgeOptions {
  readonly servers: string[];
  readonly gatewayId: string;
  readonly supervisor: Supervisor;
  readonly registry: ActorRegistry;
  readonly log: Logger;
  /** Each reconnect of one of its connections (metrics). */
  readonly onReconnect?: () => void;
  /** nats.tls (src/actors/natsTls.ts). */
  readonly tls?: TlsOptions | undefined;
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
  /**
   * Credentials NATS refused (a bad password, a user removed or revoked), until when: the
   * clients of a revoked user all come back at once, and are answered from here rather
   * than each dialling NATS to hear the same refusal.
   */
  private readonly refused = new Map<string, number>();

  constructor(private readonly options: NatsBridgeOptions) {}

  async acquire(creds: Credentials, role: ConnectionRole = "client"): Promise<NatsLease> {
    const key = role === "gateway" ? `gateway:${credentialKey(creds)}` : credentialKey(creds);
    const until = this.refused.get(key);
    if (until !== undefined) {
      if (until > Date.now()) throw new NatsConnectError("NATS refused these credentials moments ago", true);
      this.refused.delete(key);
    }
    let entry = this.shared.get(key);
    if (!entry) {
      entry = this.open(key, creds, role);
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
    return new Lease(nc, held, this, key);
  }

  /** Number of NATS connections open for clients now. */
  connectionCount(): number {
    return this.shared.size;
  }

  /** @internal (a Lease's release) */
  releaseRef(key: string, entry: Shared): void {
    entry.refs--;
    if (entry.refs > 0) return;
    if (this.shared.get(key) === entry) this.shared.delete(key);
    Deferred.doneUnsafe(entry.released, Effect.void);
  }

  /**
   * Where a new connection dials: the configured servers and every server the open
   * connections learnt from the cluster (INFO's connect_urls). A gateway given one seed URL
   * keeps taking new clients when that node is gone; nats.js tries the pool in turn.
   */
  private pool(): string[] {
    const known = new Set(this.options.servers);
    for (const entry of this.shared.values()) for (const s of entry.nc?.getServers() ?? []) known.add(s.listen);
    return [...known];
  }

  private open(key: string, creds: Credentials, role: ConnectionRole): Shared {
    const { gatewayId, supervisor, registry, log, onReconnect, tls } = this.options;
    const servers = this.pool();
    let resolveReady!: (nc: NatsConnection) => void;
    let rejectReady!: (e: Error) => void;
    const entry: Shared = {
      refs: 0,
      ready: new Promise((res, rej) => {
        resolveReady = res;
        rejectReady = rej;
      }),
      listeners: new Set(),
      released: Deferred.makeUnsafe<void>(),
    };
    entry.ready.catch(() => {});
    const shared = this.shared;
    const refused = this.refused;
    const refuse = (k: string) => {
      if (refused.size >= 10_000) refused.clear();
      refused.set(k, Date.now() + REFUSED_CREDENTIALS_MS);
    };
    const connection = Effect.gen(function* () {
      const actor = yield* startMachine(natsConnectionMachine, {
        input: undefined,
        registry,
        on: {
          up: () => {
            for (const l of entry.listeners) l.natsStatus?.("up");
          },
          down: () => {
            for (const l of entry.listeners) l.natsStatus?.("down");
          },
        },
      });
      entry.actor = actor;
      installNatsPatches();
      const nc = yield* Effect.tryPromise({
        try: () =>
          connect({
            servers,
            user: creds.user,
            pass: creds.pass,
            token: creds.token,
            ...(creds.authenticator
              ? { authenticator: creds.authenticator }
              : creds.jwt
                ? { authenticator: jwtAuthenticator(creds.jwt) }
                : {}),
            ...(tls ? { tls } : {}),
            name: role === "gateway" ? `mq-gateway ${gatewayId}` : `mq-gateway ${gatewayId} client`,
            // Replies to the gateway's own requests are recognisable, and never delivered to clients (deliveryGuard.ts).
            inboxPrefix: role === "gateway" ? gatewayInboxPrefix(gatewayId) : clientInboxPrefix(gatewayId),
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
          if (auth) refuse(key);
          return new NatsConnectError(message, auth);
        },
      }).pipe(Effect.tapError((e) => Effect.sync(() => rejectReady(e))));
      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          if (!nc.isClosed()) await nc.drain().catch(() => nc.close());
        }),
      );
      actor.send({ type: "CONNECTED", server: nc.info?.server_name ?? "" });
      watchStatus(nc, actor, entry, onReconnect, (reason, auth) => {
        // Gone for good: the next acquire opens a new connection (after a pause, when NATS refused the user).
        if (shared.get(key) === entry) shared.delete(key);
        if (auth) refuse(key);
        log.info(
          { key, reason },
          auth
            ? "NATS no longer accepts a connection's user: closing its clients"
            : "a NATS connection closed: closing its clients",
        );
        for (const l of [...entry.listeners]) l.natsGone?.(reason, auth);
      });
      entry.nc = nc;
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

/** How long refused credentials are answered without asking NATS again. */
const REFUSED_CREDENTIALS_MS = 5_000;

function watchStatus(
  nc: NatsConnection,
  actor: MachineActor<typeof natsConnectionMachine>,
  entry: Shared,
  onReconnect: (() => void) | undefined,
  gone: (reason: string, auth: boolean) => void,
): void {
  void (async () => {
    for await (const s of nc.status()) {
      switch (s.type) {
        case "disconnect":
          actor.send({ type: "DISCONNECTED" });
          break;
        case "reconnect":
          onReconnect?.();
          actor.send({ type: "RECONNECTED", server: nc.info?.server_name ?? s.server });
          break;
        case "error": {
          const e = s.error;
          if (e instanceof PermissionViolationError) {
            const op = e.operation === "publish" ? "publish" : "subscribe";
            for (const l of entry.listeners) l.natsPermissionError?.(e.subject, op);
          }
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
    if (e instanceof Error)
      gone(e.message, e instanceof AuthorizationError || /authoriz|authenticat|revoked|expired/i.test(e.message));
    actor.send({ type: "CLOSED" });
  });
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
 *
 * Everything that asks in one turn of the event loop (one batch of socket reads) shares
 * one PING, sent when the turn's synchronous work is done, so it follows every publish of
 * that turn: a QoS 1 publish asked for a PING of its own, a socket write and a server
 * round of work each. Measured on the QoS 1 rows of
 * the bench (docs/decisions/mqtt-store.md): 18k -> 28-38k msgs/s, 35-43 -> 16-22 µs gateway
 * CPU and 22 -> 12-14 µs nats-server CPU per message.
 */
export function flushAndSettle(nc: NatsConnection): Promise<void> {
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

/** A login as the bridge takes it. */
export function bridgeCredentialsOf(login: LoginCredentials): Credentials {
  switch (login.kind) {
    case "user":
      return { user: login.user, pass: login.pass };
    case "token":
      return { token: login.token };
    case "jwt":
      return { jwt: login.jwt };
    case "anonymous":
      return {};
  }
}

/** A new reply subject under the connection's own inbox prefix (vendor/natsjs.ts reads it). */
export function inboxOf(nc: NatsConnection): string {
  return createInbox(inboxPrefixOf(nc));
}

/** Clients with equal credentials share one connection; the key never holds a secret in clear. */
export function credentialKey(creds: Credentials): string {
  if (!creds.user && !creds.pass && !creds.token && !creds.jwt && !creds.authenticatorKey) return "anonymous";
  return createHash("sha256")
    .update(
      JSON.stringify([
        creds.user ?? null,
        creds.pass ?? null,
        creds.token ?? null,
        creds.authenticatorKey ?? null,
        creds.jwt ?? null,
      ]),
    )
    .digest("hex")
    .slice(0, 24);
}
