import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { Effect, FiberMap, type Scope } from "effect";
import type { Connection, EventContext } from "rhea";
import type { Logger } from "../../log.js";
import { amqpConnectionMachine, type Login } from "../../machines/amqpConnection.js";
import { screenInput, serverContainer } from "../../vendor/rhea.js";
import { ActorTasks } from "../actorTasks.js";
import type { BanCheck } from "../admin/banList.js";
import type { Bindings } from "../bindings.js";
import { acquireNatsAccess } from "../client/natsAccess.js";
import type { NatsBridge, NatsLease } from "../client/natsBridge.js";
import type { ClientHandle, ClientRegistry } from "../clients.js";
import type { MachineActor } from "../machineActor.js";
import { awaitDone, startMachine } from "../machineActor.js";
import type { MessageStore } from "../messageStore.js";
import type { Metrics } from "../metrics.js";
import type { Quotas } from "../quotas.js";
import type { ActorRegistry } from "../registry.js";
import { type LinkContext, linkContext } from "./context.js";
import { corkPerTick } from "./corkedWrites.js";
import { FrameGuard, SASL_HEADER } from "./frameGuard.js";
import { guarded } from "./guarded.js";
import { ConnectionLinks, type SpawnLink } from "./links.js";
import { Outflow } from "./outflow.js";
import { saslMechanisms, verifiedCertificateName } from "./sasl.js";
import type { AmqpSettings } from "./settings.js";

export interface AmqpDeps {
  readonly bridge: NatsBridge;
  readonly clients: ClientRegistry;
  readonly registry: ActorRegistry;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly bindings: Bindings;
  /** The MQTT store: unsettled messages to unbound subjects are kept there for MQTT sessions. */
  readonly messages: MessageStore;
  readonly settings: () => AmqpSettings;
  readonly accountOf: (lease: NatsLease, username: string | undefined) => Promise<string>;
  /** limits.max_connections_per_account (0: none), counted over MQTT and AMQP clients alike. */
  readonly maxConnectionsPerAccount: () => number;
  /** Bans in force on every gateway: a banned client is closed with amqp:unauthorized-access once open. */
  readonly bans?: BanCheck;
  /** limits.max_topic_levels (0: none): tokens of an AMQP address. */
  readonly maxTopicLevels: () => number;
  /** limits.per_client and limits.per_account, shared with MQTT clients (quotas.ts). */
  readonly quotas: Quotas;
  /** The gateway's id: its container-id in every open. */
  readonly gatewayId: string;
  readonly version: string;
}

type Machine = MachineActor<typeof amqpConnectionMachine>;

const CLOSE_GRACE_MS = 2_000;

/**
 * The actor behind one AMQP socket. rhea speaks the protocol; the machine decides the
 * connection's life; this class carries out the machine's commands, turns rhea's
 * events into machine events, and starts an actor per link once the client is served.
 */
class AmqpClientConnection {
  private actor!: Machine;
  private readonly settings: AmqpSettings;
  private readonly log: Logger;
  private readonly guard: FrameGuard;
  private readonly conn: Connection;
  private lease: NatsLease | undefined;
  private login: Login | undefined;
  private handle: ClientHandle | undefined;
  private account = "";
  /** Stops hearing that the client's NATS user is gone. */
  private unlistenGone: (() => void) | undefined;
  private answerSasl: ((ok: boolean) => void) | undefined;
  private ctx: LinkContext | undefined;
  private readonly links: ConnectionLinks;
  private lastActivity = 0;
  /** Its async work (the NATS login), made when first started; interrupted at cleanup. */
  private work: ActorTasks | undefined;

  constructor(
    private readonly socket: Duplex,
    private readonly remote: string,
    private readonly cid: number,
    private readonly deps: AmqpDeps,
    spawnLink: SpawnLink,
  ) {
    this.settings = deps.settings();
    this.log = deps.log.child({ cid, remote, protocol: "amqp" });
    this.links = new ConnectionLinks(
      // The connection's machine is over: a late begin or attach starts nothing.
      () => this.actor.getSnapshot().status !== "active",
      spawnLink,
      deps.registry,
      this.log,
      this.settings.maxSenderLinks + this.settings.maxReceiverLinks,
      (condition, description) => this.protocolError(condition, description),
      `amqp-${cid}`,
    );
    this.guard = new FrameGuard({
      maxFrameSize: this.settings.maxFrameSize,
      channelMax: this.settings.channelMax,
      plainHeaderAllowed: this.settings.sasl.includes("ANONYMOUS"),
    });
    const refuse = (reason: string) => this.saslRefused(reason);
    const container = serverContainer(
      deps.gatewayId,
      saslMechanisms(this.settings.sasl, (login) => this.authenticate(login), verifiedCertificateName(socket), refuse),
      (name) => refuse(`mechanism ${name} not offered`),
    );
    // rhea raises link and session errors nobody handled on its container; they must not throw.
    container.on("error", (e: Error) => this.log.debug({ err: e.message }, "AMQP endpoint error"));
    this.conn = container.create_connection({
      id: `amqp-${cid}`,
      container_id: deps.gatewayId,
      max_frame_size: this.settings.maxFrameSize,
      channel_max: this.settings.channelMax,
      idle_time_out: this.settings.idleTimeoutMs,
      // Qpid JMS and others look for this before using a null target.
      offered_capabilities: ["ANONYMOUS-RELAY"],
      properties: { product: "mq-gateway", version: deps.version },
      reconnect: false,
      // Each link grants credit and settles by hand (senderLink.ts, receiverLink.ts).
      receiver_options: { credit_window: 0, autoaccept: false },
      sender_options: { autosettle: true, treat_modified_as_released: false },
      // Bounded by the links' credit; rhea's default (2048) would be the binding limit instead.
      session_buffer_size: 32_768,
    } as never);
  }

  commands(): NonNullable<Parameters<typeof startMachine<typeof amqpConnectionMachine>>[1]["on"]> {
    return {
      acquire_nats: ({ login }) => this.tasks().run(() => this.acquireNats(login)),
      sasl_outcome: ({ ok }) => {
        this.answerSasl?.(ok);
        this.answerSasl = undefined;
      },
      answer_header: () => this.socket.end(SASL_HEADER),
      serve: () => this.serve(),
      close_connection: ({ error }) => this.conn.close(error),
      close: () => this.endSocket(),
    };
  }

  start(actor: Machine): void {
    this.actor = actor;
    screenInput(
      this.conn,
      (chunk) => this.screen(chunk),
      () => {
        this.links.checkIncomplete();
        // A flow or disposition read may let the receiving links go on.
        this.ctx?.outflow.check();
      },
    );
    this.socket.on("error", () => {});
    this.socket.on("close", () => actor.send({ type: "SOCKET_CLOSED" }));
    const c = this.conn;
    c.on("connection_open", () => actor.send({ type: "OPENED", containerId: String(c.container_id ?? "") }));
    c.on("connection_close", () => actor.send({ type: "REMOTE_CLOSE" }));
    c.on("disconnected", () => actor.send({ type: "SOCKET_CLOSED" }));
    c.on("protocol_error", (e: Error) => this.protocolError("amqp:connection:framing-error", e.message));
    c.on("error", (e: Error) => this.protocolError("amqp:internal-error", e.message));
    c.on("sender_open", (ctx: EventContext) => this.links.attached(ctx.sender!, "receiver"));
    c.on("receiver_open", (ctx: EventContext) => this.links.attached(ctx.receiver!, "sender"));
    c.on("session_open", (ctx: EventContext) => this.links.begun(ctx.session!));
    c.on("session_close", (ctx: EventContext) => this.links.sessionEnded(ctx.session));
    c.on("session_error", (ctx: EventContext) => this.links.sessionEnded(ctx.session));
    corkPerTick(this.socket);
    c.accept(this.socket as Socket);
  }

  fail(e: unknown): void {
    this.log.error({ err: e instanceof Error ? e.stack : String(e) }, "AMQP connection failed");
    this.protocolError("amqp:internal-error", "the gateway failed on this connection");
  }

  private tasks(): ActorTasks {
    this.work ??= new ActorTasks((e) => this.fail(e));
    return this.work;
  }

  cleanup(): void {
    this.work?.close();
    this.links.close();
    this.answerSasl?.(false);
    this.ctx?.publisher.close();
    if (this.handle) this.deps.clients.remove(this.handle);
    // Registered when served (serve()).
    if (this.handle) this.deps.metrics.connected("amqp", this.account, -1);
    this.unlistenGone?.();
    this.lease?.release();
    this.lease = undefined;
    this.endSocket();
  }

  // -- bytes --------------------------------------------------------------------------

  /** False: rhea must not see this chunk (nor anything after it). */
  private screen(chunk: Buffer): boolean {
    // Once the guard found a violation, rhea reads nothing more of this socket.
    const pass = !this.guard.stopped();
    const notes = this.guard.scan(chunk);
    for (const n of notes) {
      if (n.kind === "header") this.actor.send({ type: "HEADER", sasl: n.sasl });
      else {
        this.deps.metrics.refused("amqp", n.kind === "bad_header" ? "bad_header" : "framing_error");
        this.log.info({ reason: n.description }, "closing AMQP client: protocol error");
        if (n.kind === "bad_header") this.actor.send({ type: "HEADER_MISMATCH", description: n.description });
        else this.actor.send({ type: "PROTOCOL_ERROR", error: { condition: n.condition, description: n.description } });
      }
    }
    // A few machine events per idle period, however many frames arrive.
    const now = Date.now();
    if (now - this.lastActivity > this.settings.idleTimeoutMs / 4) {
      this.lastActivity = now;
      this.actor.send({ type: "ACTIVITY" });
    }
    return pass && !this.guard.stopped();
  }

  /** The connection's close line: one per connection, as for MQTT (docs/operations.md). */
  logClosed(): void {
    const { containerId, closeReason } = this.actor.getSnapshot().context;
    this.log.info(
      { client_id: containerId || undefined, account: this.handle ? this.account : undefined, reason: closeReason },
      "AMQP connection closed",
    );
  }

  private protocolError(condition: string, description: string): void {
    this.log.info({ reason: description }, "closing AMQP client: protocol error");
    sendIfActiveConnection(this.actor, { type: "PROTOCOL_ERROR", error: { condition, description } });
  }

  private endSocket(): void {
    if (!this.socket.destroyed) this.socket.end();
    // A peer that never reads must not keep the socket (and its buffers) alive.
    setTimeout(() => this.socket.destroy(), CLOSE_GRACE_MS).unref();
  }

  // -- login --------------------------------------------------------------------------

  /** Called by the SASL mechanism; answers once NATS has accepted or refused the login. */
  private authenticate(login: Login): Promise<boolean> {
    return new Promise((resolve) => {
      this.answerSasl = resolve;
      this.actor.send({ type: "AUTHENTICATE", login });
      if (!this.actor.getSnapshot().matches("authenticating")) {
        this.answerSasl = undefined;
        resolve(false);
      }
    });
  }

  /** rhea answered SASL's `auth` outcome itself: NATS never saw this login. */
  private saslRefused(reason: string): void {
    this.deps.metrics.refused("amqp", "bad_credentials");
    this.log.info({ reason }, "AMQP login refused before NATS");
    sendIfActiveConnection(this.actor, { type: "SASL_REFUSED", reason });
  }

  /** The client's own NATS connection, its account and the per-account limit (client/natsAccess.ts, shared with MQTT). */
  private async acquireNats(login: Login): Promise<void> {
    this.login = login;
    const access = await acquireNatsAccess(
      this.deps,
      "amqp",
      login.credentials,
      login.username,
      () => this.actor.getSnapshot().status === "active",
    );
    if (access.kind === "gone") return;
    if (access.kind === "refused") {
      this.log.info(
        { mechanism: login.mechanism, user: login.username, err: access.reason },
        "AMQP login refused by NATS",
      );
      return sendIfActiveConnection(this.actor, { type: "NATS_REFUSED", auth: access.auth, reason: access.reason });
    }
    this.lease = access.lease;
    // The client's NATS user is gone (removed, revoked): so is the client.
    this.unlistenGone = access.lease.onGone((reason, auth) =>
      this.protocolError(
        auth ? "amqp:unauthorized-access" : "amqp:connection:forced",
        `NATS closed the client's connection: ${reason}`,
      ),
    );
    if (access.kind === "no account") return this.fail(new Error(`account could not be told: ${access.reason}`));
    this.account = access.account;
    if (access.kind === "over limit") {
      this.log.info(
        { account: this.account, limit: access.limit },
        "AMQP client refused: account at its connection limit",
      );
      return sendIfActiveConnection(this.actor, {
        type: "LIMIT_REFUSED",
        error: {
          condition: "amqp:resource-limit-exceeded",
          description: `account ${this.account || "(none)"} has ${access.limit} connections on this gateway`,
        },
      });
    }
    sendIfActiveConnection(this.actor, { type: "NATS_READY", account: this.account });
  }

  private serve(): void {
    const lease = this.lease!;
    const containerId = this.actor.getSnapshot().context.containerId;
    const username = this.login?.username;
    const banned = this.deps.bans?.refusal({ clientId: containerId, username, remote: this.remote });
    if (banned) {
      this.deps.metrics.refused("amqp", "banned");
      return this.protocolError("amqp:unauthorized-access", banned);
    }
    this.deps.metrics.connected("amqp", this.account, +1);
    this.handle = {
      cid: this.cid,
      protocol: "amqp",
      clientId: containerId,
      username,
      remote: this.remote,
      since: new Date(),
      account: this.account,
      natsServer: () => lease.server(),
      subscriptions: () => this.links.receiverCount(),
      // AMQP has no QoS: a link's settlement mode is not one.
      subscriptionList: () => this.links.receiverSources().map((filter) => ({ filter, qos: null })),
      natsConnection: () => lease.nats,
      kick: () => this.actor.send({ type: "KICK" }),
      shutdown: () => this.actor.send({ type: "SHUTDOWN" }),
      // AMQP has no client-id takeover (CONTRACT: "same client id connects again" is MQTT's).
      takeOver: () => {},
    };
    this.deps.clients.add(this.handle);
    this.ctx = linkContext({
      lease,
      account: this.account,
      containerId,
      settings: this.settings,
      maxTopicLevels: this.deps.maxTopicLevels(),
      quota: this.deps.quotas.forClient("amqp", this.account),
      bindings: this.deps.bindings,
      messages: this.deps.messages,
      metrics: this.deps.metrics,
      registry: this.deps.registry,
      outflow: new Outflow(this.socket),
      log: this.log.child({ client_id: containerId }),
      closeConnection: (condition, description) => this.protocolError(condition, description),
    });
    this.log.info(
      { client_id: containerId, account: this.account, mechanism: this.login?.mechanism, user: this.login?.username },
      "AMQP client connected",
    );
    this.links.serve(this.ctx);
  }
}

function sendIfActiveConnection(actor: Machine, event: Parameters<Machine["send"]>[0]): void {
  if (actor.getSnapshot().status === "active") actor.send(event);
}

/** One AMQP connection as a supervised actor: its socket, lease, links and machine live in its scope. */
export const amqpConnectionActor = (
  socket: Duplex,
  remote: string,
  cid: number,
  deps: AmqpDeps,
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    let client: AmqpClientConnection | undefined;
    // Registered first, so it runs last: the links' finalizers still use the lease.
    yield* Effect.addFinalizer(() => Effect.sync(() => client?.cleanup()));
    const links = yield* FiberMap.make<number>();
    client = new AmqpClientConnection(socket, remote, cid, deps, (id, link) => {
      Effect.runFork(FiberMap.run(links, id)(Effect.scoped(link)));
    });
    const settings = deps.settings();
    const actor = yield* startMachine(amqpConnectionMachine, {
      id: `amqp-${cid}`,
      input: {
        handshakeTimeoutMs: settings.handshakeTimeoutMs,
        idleTimeoutMs: settings.idleTimeoutMs,
        closeGraceMs: CLOSE_GRACE_MS,
      },
      registry: deps.registry,
      on: guarded(client.commands() as Record<string, (e: never) => void>, client) as ReturnType<
        AmqpClientConnection["commands"]
      >,
    });
    client.start(actor);
    yield* awaitDone(actor, () => client?.logClosed());
  });
