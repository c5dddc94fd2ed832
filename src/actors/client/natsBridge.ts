import { createHash } from "node:crypto";
import {
  type Authenticator,
  AuthorizationError,
  connect,
  jwtAuthenticator,
  type TlsOptions,
} from "@nats-io/transport-node";
import { Deferred, Effect } from "effect";
import type { Logger } from "../../log.js";
import { natsConnectionMachine } from "../../machines/natsConnection.js";
import { clientInboxPrefix, gatewayInboxPrefix } from "../../protocol/deliveryGuard.js";
import type { LoginCredentials } from "../../protocol/natsLogin.js";
import { installNatsPatches } from "../../vendor/natsjs.js";
import type { MachineActor } from "../machineActor.js";
import { startMachine } from "../machineActor.js";
import type { ActorRegistry } from "../registry.js";
import type { Supervisor } from "../supervisor.js";
import { NatsSeam } from "./natsSeam.js";

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
  /** What the client may do on its connection (client/natsSeam.ts): the only way to it. */
  readonly nats: NatsSeam;
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
    readonly nats: NatsSeam,
    private readonly entry: Shared,
    private readonly bridge: NatsBridge,
    private readonly key: string,
  ) {
    this.holding = entry;
  }

  server(): string {
    return this.nats.serverName();
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
  ready: Promise<NatsSeam>;
  /** Once connected: its server pool is where new connections dial too (pool()). */
  nats?: NatsSeam;
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
    let nats: NatsSeam;
    try {
      nats = await held.ready;
    } catch (e) {
      this.releaseRef(key, held);
      throw e;
    }
    return new Lease(nats, held, this, key);
  }

  /**
   * A lease of the connection these credentials share when it is up already (a client's
   * CONNECT then needs no wait for NATS); undefined when that would mean dialling or waiting.
   */
  acquireNow(creds: Credentials): NatsLease | undefined {
    const key = credentialKey(creds);
    const entry = this.shared.get(key);
    if (!entry?.nats || this.refused.has(key)) return undefined;
    entry.refs++;
    return new Lease(entry.nats, entry, this, key);
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
    for (const entry of this.shared.values()) for (const s of entry.nats?.pool() ?? []) known.add(s);
    return [...known];
  }

  private open(key: string, creds: Credentials, role: ConnectionRole): Shared {
    const { gatewayId, supervisor, registry, log, onReconnect, tls } = this.options;
    const servers = this.pool();
    let resolveReady!: (nats: NatsSeam) => void;
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
      const nats = NatsSeam.of(nc);
      nats.watch({
        disconnected: () => actor.send({ type: "DISCONNECTED" }),
        reconnected: (server) => {
          onReconnect?.();
          actor.send({ type: "RECONNECTED", server });
        },
        permissionDenied: (subject, op) => {
          for (const l of entry.listeners) l.natsPermissionError?.(subject, op);
        },
        closed: (error, auth) => {
          if (error) {
            // Gone for good: the next acquire opens a new connection (after a pause, when NATS refused the user).
            if (shared.get(key) === entry) shared.delete(key);
            if (auth) refuse(key);
            log.info(
              { key, reason: error.message },
              auth
                ? "NATS no longer accepts a connection's user: closing its clients"
                : "a NATS connection closed: closing its clients",
            );
            for (const l of [...entry.listeners]) l.natsGone?.(error.message, auth);
          }
          actor.send({ type: "CLOSED" });
        },
      });
      entry.nats = nats;
      resolveReady(nats);
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
