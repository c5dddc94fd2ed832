import {
  AuthorizationError,
  type Msg,
  PermissionViolationError,
  type Subscription,
  type TlsOptions,
} from "@nats-io/transport-node";
import { Effect, type Scope } from "effect";
import type { Credentials } from "../../config/schema.js";
import type { Logger } from "../../log.js";
import { type AdminConnectionEvent, adminConnectionMachine } from "../../machines/adminConnection.js";
import { ActorTasks } from "../actorTasks.js";
import { dial, type NatsSeam } from "../client/natsSeam.js";
import { bridgeCredentials, describeCredentials } from "../gatewayCredentials.js";
import { type MachineActor, startMachine } from "../machineActor.js";
import { once } from "../once.js";
import { type ActorRegistry, stateName } from "../registry.js";
import { adminAccountName } from "./accountName.js";
import type { AccountScopes } from "./scopes.js";
import { accountScopeSubject, PING_SCOPE_SUBJECT, serverScopeSubject } from "./subjects.js";

export interface AdminConnectionOptions {
  readonly credentials: Credentials;
  readonly servers: readonly string[];
  readonly id: string;
  readonly log: Logger;
  readonly registry: ActorRegistry;
  readonly scopes: AccountScopes;
  readonly onRequest: (msg: Msg) => void;
  readonly tls?: TlsOptions | undefined;
  /** Told each connection that serves (the bans bucket is followed on it). */
  readonly onServing?: (nats: NatsSeam) => void;
  /** True once the gateway stops: the connection then goes on purpose, which is not worth a warning. */
  readonly stopping?: () => boolean;
}

/**
 * The edge of the adminConnection machine: the NATS connection with the admin user and
 * its subscriptions to the three scopes (one per served account). The machine decides
 * when to connect and what to warn about; this connects, subscribes and reports back.
 */
export class AdminConnection {
  private actor: MachineActor<typeof adminConnectionMachine> | undefined;
  /** Reports that arrive before startMachine has handed over the actor. */
  private early: AdminConnectionEvent[] = [];
  private nats: NatsSeam | undefined;
  private readonly subs = new Map<string, Subscription>();

  constructor(private readonly options: AdminConnectionOptions) {}

  /** `serving`, `down.reconnecting`, ... for /healthz. */
  state(): string {
    const snap = this.actor?.getSnapshot();
    return snap?.status === "active" ? stateName(snap.value) : "stopped";
  }

  /** The admin account's name while the connection serves, else null. */
  account(): string | null {
    const snap = this.actor?.getSnapshot();
    return snap?.matches("serving") ? snap.context.account : null;
  }

  maxPayload(): number {
    return this.nats?.info()?.max_payload ?? 1024 * 1024;
  }

  /** A request to another gateway's admin subjects (a session drop asks the session's gateway to kick). */
  async request(subject: string, body: object, timeoutMs: number): Promise<Record<string, unknown>> {
    if (!this.nats || this.nats.isClosed()) throw new Error("the admin connection is down");
    const reply = await this.nats.request(subject, JSON.stringify(body), timeoutMs);
    return reply.json<Record<string, unknown>>();
  }

  /** Runs until its scope closes; supervise it with restarts. */
  run(): Effect.Effect<void, never, Scope.Scope> {
    return Effect.gen({ self: this }, function* () {
      this.actor = undefined;
      this.early = [];
      const { log, registry, scopes } = this.options;
      let unwatch: (() => void) | undefined;
      // Said once: a stopping gateway's admin connection may be told of its end more than once.
      const sayStopping = once((reason: string) =>
        log.info({ reason }, "admin connection closed: the gateway is stopping"),
      );
      // Registered before the machine starts, so it runs once the machine has stopped: a
      // connect that finishes after that finds it stopped and closes what it made.
      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          unwatch?.();
          // Draining flushes replies already written.
          await this.closeConnection(true);
        }),
      );
      // A connect failing past its own catch is one more failed connect: the machine tries again.
      const tasks = yield* ActorTasks.scoped((e) =>
        this.send({ type: "CONNECT_FAILED", reason: String(e), auth: false }),
      );
      const actor = yield* startMachine(adminConnectionMachine, {
        input: undefined,
        registry,
        on: {
          connect: () => tasks.run((ended) => this.connect(ended)),
          subscribe: () => this.subscribeAll(),
          serving: ({ account, server }) => {
            log.info({ admin_account: account, server }, "admin connection serving the admin subjects");
            if (this.nats) this.options.onServing?.(this.nats);
          },
          warn: ({ message, reason, retryInMs }) => {
            // A stopping gateway closes its NATS (the embedded nats-server stops with it): expected, said once at info.
            if (this.options.stopping?.()) return sayStopping(reason);
            // A refused user is named (never its secret): what the operator compares with nats-server's config.
            const refused = message.startsWith("NATS refused the admin user")
              ? { credentials: describeCredentials(this.options.credentials) }
              : {};
            log.warn({ reason, ...refused, ...(retryInMs !== undefined ? { retry_in_ms: retryInMs } : {}) }, message);
          },
        },
      });
      this.actor = actor;
      for (const e of this.early.splice(0)) actor.send(e);
      unwatch = scopes.onChange((account, served) => {
        if (served) this.subscribe(accountScopeSubject(account));
        else this.unsubscribe(accountScopeSubject(account));
      });
      yield* Effect.never;
    });
  }

  private send(event: AdminConnectionEvent): void {
    if (this.actor) this.actor.send(event);
    else this.early.push(event);
  }

  /** `ended`: aborted when this run of the actor ends (a restart runs another). */
  private async connect(ended: AbortSignal): Promise<void> {
    await this.closeConnection(false);
    const { servers, id, credentials } = this.options;
    let nats: NatsSeam;
    try {
      const creds = await bridgeCredentials(credentials);
      nats = await dial({
        servers: [...servers],
        ...(creds.user !== undefined ? { user: creds.user } : {}),
        ...(creds.pass !== undefined ? { pass: creds.pass } : {}),
        ...(creds.token !== undefined ? { token: creds.token } : {}),
        ...(creds.authenticator ? { authenticator: creds.authenticator } : {}),
        ...(this.options.tls ? { tls: this.options.tls } : {}),
        name: `mq-gateway ${id} admin`,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        noAsyncTraces: true,
        ignoreAuthErrorAbort: false,
      });
    } catch (e) {
      const reason = e instanceof Error ? e.message : String(e);
      const auth =
        e instanceof AuthorizationError || /authoriz|authenticat|secret|cannot be read|not set/i.test(reason);
      this.send({ type: "CONNECT_FAILED", reason, auth });
      return;
    }
    // Not handed over yet counts as running: this connect is the machine's first command.
    if (ended.aborted || this.actor?.getSnapshot().status === "stopped") return void (await nats.close(false));
    this.nats = nats;
    this.watch(nats);
    const account = await adminAccountName(nats, credentials);
    if (this.nats === nats) this.send({ type: "CONNECTED", account, server: nats.serverName() });
  }

  private watch(nats: NatsSeam): void {
    // What concerns a connection replaced since (closeConnection, a new connect) is not this one's to tell.
    nats.watch({
      disconnected: () => {
        if (this.nats === nats) this.send({ type: "DISCONNECTED" });
      },
      reconnected: () => {
        if (this.nats === nats) this.send({ type: "RECONNECTED", server: nats.serverName() });
      },
      closed: (e) => {
        if (this.nats !== nats) return;
        this.nats = undefined;
        this.subs.clear();
        this.send({ type: "CLOSED", reason: e ? e.message : "connection closed" });
      },
    });
  }

  private subscribeAll(): void {
    this.subscribe(serverScopeSubject(this.options.id));
    this.subscribe(PING_SCOPE_SUBJECT);
    for (const account of this.options.scopes.served()) this.subscribe(accountScopeSubject(account));
  }

  private subscribe(subject: string): void {
    const nats = this.nats;
    if (!nats || nats.isClosed() || this.subs.has(subject)) return;
    let sub: Subscription;
    try {
      sub = nats.subscribe(subject, {
        callback: (e, msg) => {
          if (!e) return this.options.onRequest(msg);
          if (this.subs.get(subject) === sub) this.subs.delete(subject);
          if (e instanceof PermissionViolationError) {
            this.send({ type: "SUBSCRIBE_REFUSED", subject, reason: e.message });
          } else {
            this.options.log.warn({ subject, err: e.message }, "admin subscription ended");
          }
        },
      });
    } catch (e) {
      // Draining or closing: this runs inside a client's registration, which must not fail for it.
      this.options.log.warn({ subject, err: (e as Error).message }, "admin subscription not made");
      return;
    }
    this.subs.set(subject, sub);
  }

  private unsubscribe(subject: string): void {
    this.subs.get(subject)?.unsubscribe();
    this.subs.delete(subject);
  }

  private async closeConnection(drain: boolean): Promise<void> {
    const nats = this.nats;
    this.nats = undefined;
    this.subs.clear();
    await nats?.close(drain);
  }
}
