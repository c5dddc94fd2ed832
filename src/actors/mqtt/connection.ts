import type { Duplex } from "node:stream";
import type { IAuthPacket, IConnectPacket, IPublishPacket, Packet } from "mqtt-packet";
import type { HomeMove } from "../../gateway/sessionHomes.js";
import type { Logger } from "../../log.js";
import {
  type ConnectRequest,
  effectiveKeepalive,
  type MqttConnectionEmitted,
  type mqttConnectionMachine,
  termsOf,
} from "../../machines/mqttConnection.js";
import { noTopicFilter, splitFrames } from "../../protocol/mqttFrame.js";
import { Reason } from "../../protocol/mqttReasons.js";
import { beforeConnect, type ParserSettings, settingsAfterConnect } from "../../vendor/mqttPacket.js";
import type { LeaseListener, LeaseStatus, NatsLease } from "../client/natsBridge.js";
import type { MachineActor } from "../machineActor.js";
import { ClientBytes } from "./clientBytes.js";
import { authAnswer, connackPacket, homeQuestion, readConnect } from "./connect.js";
import type { MqttDeps } from "./deps.js";
import { EarlyBytes } from "./earlyBytes.js";
import { decodeFrame } from "./frameDecode.js";
import type { MqttClientHandle } from "./handle.js";
import { onPubrec, onPubrel } from "./handshakes.js";
import type { InboundPublisher } from "./inbound.js";
import { InboundTopicAliases, takenPublish } from "./inboundAliases.js";
import { InboundBytes } from "./inboundBytes.js";
import { connectDeadline, connectWheel, type KeepaliveWatched, keepaliveWheel } from "./keepaliveWheel.js";
import { type ConnectionLink, DeniedSubjects } from "./link.js";
import { acquireNatsForConnect, natsForConnectNow } from "./natsForConnect.js";
import { Outbox } from "./outbox.js";
import { type PacketDrops, PacketWriter } from "./packetWriter.js";
import { ignoreSocketError, SocketReads } from "./readBatch.js";
import type { ClientSession } from "./session.js";
import { SessionActor, type SessionOwner } from "./sessionActor.js";
import { openSessionParts } from "./sessionParts.js";
import type { MqttSettings } from "./settings.js";
import { endSocket } from "./socketEnd.js";
import { SubscribesInFlight } from "./subscribesInFlight.js";

type Machine = MachineActor<typeof mqttConnectionMachine>;
const EMPTY = Buffer.alloc(0);
/** Between an accepted CONNECT and its CONNACK: NATS access and the session are on their way. */
const awaitingConnack = (state: ReturnType<Machine["getSnapshot"]>) => state.hasTag("awaitingConnack");

/**
 * The actor behind one MQTT socket. The machine decides the connection's life; this
 * class carries out its commands and routes packets to the inbound publisher and the
 * session, which do the per-message work in plain functions.
 */
export class MqttClientConnection implements SessionOwner, PacketDrops, LeaseListener {
  private actor!: Machine;
  /** The packets the fast path leaves go to one shared mqtt-packet parser (mqttParse.ts). */
  private parserSettings: ParserSettings = beforeConnect;
  private readonly buffered = new InboundBytes();
  private version: 4 | 5 = 4;
  private assignedId: string | undefined;
  /** The CONNECT as read: the machine holds its terms only (ConnectTerms), this the client's identity and will. */
  private request: ConnectRequest | undefined;
  private lease: NatsLease | undefined;
  private handle: MqttClientHandle | undefined;
  private inbound: InboundPublisher | undefined;
  private link: ConnectionLink | undefined;
  session: ClientSession | undefined;
  private sessionActor: SessionActor | undefined;
  private clientReceiveMax = 65535;
  private topicAliases: InboundTopicAliases | undefined;
  private readonly denied = new DeniedSubjects();
  /** Keep alive (keepaliveWheel.ts): the last packet's time, 1.5 x the keep alive (0: off), the wheel's slot. */
  lastActivity = 0;
  keepaliveLimitMs = 0;
  keepaliveSlot = 0;
  /** Backpressure (docs/decisions/backpressure.md): whether the socket is paused now (a scheduling guard, not a state). */
  private paused = false;
  /** SUBSCRIBEs under way, which a PUBLISH read meanwhile waits for; made with the first. */
  private subscribes: SubscribesInFlight | undefined;
  private readonly settings: MqttSettings;
  private childLog: Logger | undefined;
  /** Made on first use: most connections never log between their open and close lines. */
  get log(): Logger {
    return (this.childLog ??= this.deps.log.child({ cid: this.cid, remote: this.remote }));
  }

  constructor(
    private readonly socket: Duplex,
    readonly remote: string,
    private readonly cid: number,
    private readonly deps: MqttDeps,
  ) {
    this.settings = deps.settings();
    this.early = new EarlyBytes(deps.connectBuffers, socket, deps.metrics, this);
    this.outbox = new Outbox(socket);
    this.writer = new PacketWriter(this.outbox, this);
    this.bytes = ClientBytes.of(this.settings, socket, this.outbox, this);
  }

  // PacketDrops: methods, not closures per connection (idle memory).
  tooLarge(): void {
    this.deps.metrics.dropped("mqtt", "too_large_for_client");
  }

  unencodable(cmd: string, why: string): void {
    this.deps.metrics.dropped("mqtt", "unencodable");
    this.log.warn({ cmd, err: why }, "MQTT packet not sent: it cannot be encoded");
  }

  /** The machine's commands: one dispatcher, not a closure per command and connection. */
  command(e: MqttConnectionEmitted): void {
    switch (e.type) {
      case "acquire_nats":
        return void acquireNatsForConnect(this.deps, this.request!, this.actor, this);
      case "open_session":
        return this.openSession();
      case "detach_session":
        return this.sessionActor?.detach(e.expirySec);
      case "connack":
        return this.sendConnack(e.returnCode, e.sessionPresent);
      case "serve":
        return this.serve();
      case "disconnect":
        if (this.version === 5)
          this.write({
            cmd: "disconnect",
            reasonCode: e.reasonCode,
            properties: e.reason ? { reasonString: e.reason } : {},
          } as Packet);
        return;
      case "publish_will": {
        const done = () => this.actor.send({ type: "WILL_DONE" });
        if (!this.link) return queueMicrotask(done);
        const { will } = this.request!;
        return this.link.tasks.run(() => this.inbound!.will(will!).catch(() => {}), done);
      }
      case "end_socket":
      case "close":
        return endSocket(this.socket, this.outbox);
      case "hand_off":
        return this.moving?.go();
    }
  }

  /** Until CONNECT: its deadline on the shared clock. */
  private connectDeadline: KeepaliveWatched | undefined;

  start(actor: Machine): void {
    this.actor = actor;
    this.connectDeadline = connectDeadline(actor.getSnapshot().context.connectTimeoutMs, () =>
      actor.send({ type: "CONNECT_TIMEOUT" }),
    );
    const reads = new SocketReads(this.socket, this);
    this.socket.on("data", (chunk: Buffer) => reads.add(chunk));
    this.socket.on("error", ignoreSocketError);
    this.socket.on("close", () => reads.closed());
  }

  /** The actor's scope closes: release everything, keeping the session if it outlives us. */
  async cleanup(): Promise<void> {
    this.link?.endTasks();
    this.early.release();
    this.bytes.close();
    keepaliveWheel.unwatch(this);
    this.endConnectDeadline();
    this.lease?.unlisten(this);
    // Not destroyed: the peer reads the DISCONNECT first (socketEnd.ts). A socket handed to
    // another worker is that worker's to end.
    if (!this.moving) endSocket(this.socket, this.outbox);
    if (this.handle) this.deps.clients.remove(this.handle);
    const sa = this.sessionActor;
    try {
      if (sa) {
        // Stopped from outside (the supervisor closing everything): the session still ends properly.
        sa.detach(this.actor.getSnapshot().context.sessionExpirySec);
        // The session machine bounds its own store calls, so this ends.
        await sa.done;
      }
    } finally {
      sa?.stop();
      this.lease?.release();
    }
  }

  /** The CONNECT's client id, once one was read. */
  get clientId(): string | undefined {
    return this.request?.clientId;
  }

  wasServing(): boolean {
    return this.session !== undefined;
  }

  account(): string {
    return this.handle?.account ?? "";
  }

  // -- bytes and packets --

  /** (SocketReads') */
  onClosed(): void {
    this.actor.send({ type: "SOCKET_CLOSED" });
  }

  /** (SocketReads') */
  onData(chunk: Buffer): void {
    if (this.keepaliveLimitMs > 0) this.lastActivity = Date.now();
    const frames = splitFrames(this.buffered.add(chunk, this.settings.maxPacketSize), this.settings.maxPacketSize);
    if (frames.kind !== "packets") {
      this.buffered.clear();
      this.socket.pause();
      if (frames.kind === "malformed") return this.protocolError(Reason.malformedPacket, frames.reason);
      this.deps.metrics.refused("mqtt", "packet_too_large");
      return this.protocolError(
        Reason.packetTooLarge,
        `packet of ${frames.length} bytes exceeds ${this.settings.maxPacketSize}`,
      );
    }
    this.buffered.keep(frames.rest);
    if (this.parserSettings === beforeConnect && !this.keepEarly(this.buffered.length)) return;
    const { packets } = frames;
    for (let i = 0; i < packets.length; i++) {
      const p = packets[i]!;
      const state = this.actor.getSnapshot();
      if (state.status !== "active") return;
      if (!this.isServing(state) && awaitingConnack(state)) return this.holdUntilServed(packets.slice(i));
      if (this.subscribes?.holds(p)) return this.holdBehindSubscribes(packets.slice(i));
      const parsed = decodeFrame(p, this.version, this.parserSettings);
      if ("malformed" in parsed) return this.protocolError(Reason.malformedPacket, parsed.malformed);
      if (parsed.cmd === "connect" && "clientId" in parsed && this.deps.homes) {
        const take = () => [...packets.slice(i), ...this.buffered.take()];
        this.moving = this.deps.homes.moveFor(homeQuestion(parsed), this.socket, take);
        if (this.moving) return this.actor.send({ type: "HAND_OFF", worker: this.moving.worker });
      }
      this.onPacket(parsed);
    }
    this.flow();
  }

  /** Under way to the session's home worker (gateway/sessionHomes.ts), once the CONNECT said so. */
  private moving: HomeMove | undefined;

  /** Packets sent before the CONNACK wait unparsed, the socket paused, until `flow` reads them (earlyBytes.ts). */
  private holdUntilServed(early: Buffer[]): void {
    this.buffered.putBack(early);
    this.paused = this.keepEarly(this.buffered.length);
    if (this.paused) this.socket.pause();
  }

  /** A PUBLISH waits, unparsed with what follows it, until the SUBSCRIBEs before it are in effect (subscribesInFlight.ts). */
  private holdBehindSubscribes(frames: Buffer[]): void {
    this.buffered.putBack(frames);
    this.paused = true;
    this.socket.pause();
  }

  /** Reads the socket while NATS is up, the client's publishes do not pile up (backpressure) and no SUBSCRIBE is awaited. */
  private flow(): void {
    const state = this.actor.getSnapshot();
    const hold =
      state.hasTag("natsDown") ||
      this.inbound?.busy() === true ||
      ((this.subscribes?.underWay ?? 0) > 0 && this.buffered.length > 0);
    if (hold === this.paused || this.socket.destroyed) return;
    // A socket paused for a protocol error stays paused.
    if (!hold && !this.isServing(state)) return;
    this.paused = hold;
    if (hold) this.socket.pause();
    else this.socket.resume();
    // Packets held while paused (before the CONNACK) are read now, before any new bytes.
    if (!hold && this.buffered.length) queueMicrotask(() => this.socket.destroyed || this.onData(EMPTY));
  }

  /** A snapshot changes only on a transition: remember the tag's answer per snapshot. */
  private servingSnapshot: unknown;
  private servingNow = false;
  private isServing(state: ReturnType<Machine["getSnapshot"]>): boolean {
    if (state !== this.servingSnapshot) {
      this.servingSnapshot = state;
      this.servingNow = state.hasTag("serving");
    }
    return this.servingNow;
  }

  private onPacket(p: Packet): void {
    const state = this.actor.getSnapshot();
    if (p.cmd === "connect") {
      if (!state.hasTag("awaitingConnect")) return this.protocolError(Reason.protocolError, "second CONNECT");
      return this.onConnect(p);
    }
    if (!this.isServing(state) || !this.session || !this.inbound) {
      return this.protocolError(Reason.protocolError, `${p.cmd} before CONNECT completed`);
    }
    switch (p.cmd) {
      case "publish":
        return this.onPublish(p);
      case "puback":
      case "pubcomp":
        this.session.outbound.complete(p.messageId ?? 0);
        return;
      case "pubrec":
        return onPubrec(this.session.outbound, this.version, p.messageId ?? 0, (r) => this.write(r));
      case "pubrel":
        return onPubrel(this.inbound, this.version, p.messageId ?? 0, (r) => this.write(r));
      case "subscribe":
      case "unsubscribe":
        if (noTopicFilter(p)) return this.protocolError(Reason.protocolError, `${p.cmd} with no topic filter`);
        return this.link!.tasks.run(() =>
          p.cmd === "subscribe"
            ? (this.subscribes ??= new SubscribesInFlight()).track(this.session!.subscribe(p), () => this.flow())
            : this.session!.unsubscribe(p),
        );
      case "pingreq":
        this.write({ cmd: "pingresp" });
        return;
      case "disconnect": {
        const asked = p.properties?.sessionExpiryInterval;
        this.actor.send({
          type: "DISCONNECT",
          reasonCode: p.reasonCode ?? 0,
          sessionExpirySec: asked === undefined ? undefined : Math.min(asked, this.settings.sessionExpiryMaxSec),
        });
        return;
      }
      case "auth": {
        // MQTT 5 section 4.12: the gateway offers no enhanced authentication.
        const answer = authAnswer(p as IAuthPacket);
        return this.protocolError(answer.reasonCode, answer.reason);
      }
      default:
        return this.protocolError(Reason.protocolError, `unexpected ${p.cmd}`);
    }
  }

  protocolError(reasonCode: number, reason: string): void {
    this.log.info({ reason }, "closing MQTT client: protocol error");
    this.actor.send({ type: "PROTOCOL_ERROR", reasonCode, reason });
  }

  // -- CONNECT --

  private endConnectDeadline(): void {
    if (this.connectDeadline) connectWheel.unwatch(this.connectDeadline);
    this.connectDeadline = undefined;
  }

  /** Bytes held before the CONNACK (a partial CONNECT, packets sent right after it), within limits.max_connect_buffer. */
  private readonly early: EarlyBytes;

  private keepEarly(bytes: number): boolean {
    if (this.early.keep(bytes)) return true;
    this.buffered.clear();
    return false;
  }

  private onConnect(p: IConnectPacket): void {
    this.early.release();
    this.endConnectDeadline();
    const outcome = readConnect(p, this.settings);
    if (!outcome.ok) {
      this.writer.configure(outcome.version, outcome.clientMaxPacket);
      this.write(outcome.connack);
      return this.protocolError(outcome.reasonCode, outcome.reason);
    }
    this.version = outcome.request.protocolVersion;
    this.writer.configure(this.version, outcome.clientMaxPacket, outcome.clientTopicAliasMax);
    this.parserSettings = settingsAfterConnect(this.version, (p as { bridgeMode?: boolean }).bridgeMode);
    this.assignedId = outcome.assignedId;
    this.clientReceiveMax = outcome.clientReceiveMax;
    const { request } = outcome;
    this.request = request;
    this.actor.send({ type: "CONNECT", terms: termsOf(request), nats: natsForConnectNow(this.deps, request, this) });
  }

  /** Registers the client and makes its session (sessionParts.ts), then starts the session's machine. */
  private openSession(): void {
    const request = this.request!;
    const parts = openSessionParts({
      cid: this.cid,
      remote: this.remote,
      version: this.version,
      request,
      account: this.actor.getSnapshot().context.account,
      lease: this.lease!,
      settings: this.settings,
      deps: this.deps,
      denied: this.denied,
      clientReceiveMax: this.clientReceiveMax,
      actor: this.actor,
      owner: this,
    });
    ({ handle: this.handle, link: this.link, session: this.session, inbound: this.inbound } = parts);
    parts.inbound.onSettled = () => this.flow();
    this.sessionActor = new SessionActor({
      link: parts.link,
      session: parts.session,
      deps: this.deps.session,
      registry: this.deps.registry,
      id: `${this.actor.id}/session`,
      directory: this.deps.directory,
      cleanStart: request.cleanStart,
      expirySec: request.sessionExpirySec,
      owner: this,
    });
  }

  // ConnectEdge (natsForConnect.ts): released at this connection's end.
  keepLease(lease: NatsLease): void {
    this.lease = lease;
  }

  natsStatus(s: LeaseStatus): void {
    this.actor.send({ type: s === "up" ? "NATS_UP" : "NATS_DOWN" });
    this.flow();
  }

  natsPermissionError(subject: string, op: "publish" | "subscribe"): void {
    (op === "publish" ? this.denied.publish : this.denied.subscribe).add(subject);
    // NATS removed a subscription it had granted (permissions shrank on a reload): so does the session.
    if (op === "subscribe") this.session?.subscriptionRefused(subject);
  }

  // The client's NATS user is gone (removed, revoked): so is the client (v5 0x87; 3.1.1 close).
  natsGone(reason: string, auth: boolean): void {
    this.protocolError(
      auth ? Reason.notAuthorized : Reason.unspecified,
      `NATS closed the client's connection: ${reason}`,
    );
  }

  // SessionOwner: what the session tells this connection, and asks for it.
  announceSession(): void {
    const { clientId, cleanStart } = this.request!;
    this.deps.announce(this.actor.getSnapshot().context.account, clientId, cleanStart);
  }

  takeOverRemote(owner: string): Promise<boolean> {
    const { clientId, cleanStart } = this.request!;
    return this.deps.remoteTakeover(this.actor.getSnapshot().context.account, clientId, owner, cleanStart);
  }

  sessionReady(sessionPresent: boolean): void {
    this.actor.send({ type: "SESSION_READY", sessionPresent });
  }

  sessionRefused(reason: string): void {
    this.log.warn({ err: reason }, "session could not be opened");
    this.actor.send({ type: "SESSION_REFUSED", reason });
  }

  private sendConnack(returnCode: number, sessionPresent: boolean): void {
    const keepalive = this.request?.keepaliveSec ?? 0;
    this.write(connackPacket(this.version, returnCode, sessionPresent, this.settings, keepalive, this.assignedId));
  }

  private serve(): void {
    // [MQTT-3.1.2-24] one and a half times the keep alive; 0 turns it off.
    this.keepaliveLimitMs = effectiveKeepalive(this.actor.getSnapshot().context) * 1500;
    this.lastActivity = Date.now();
    keepaliveWheel.watch(this);
    this.deps.metrics.connected("mqtt", this.account(), +1);
    // The root logger: a child kept per connection would cost every idle connection memory.
    this.deps.log.info(this.handle!.described(this.version), "MQTT client connected");
    this.session!.release();
    // What came after the CONNECT (held until now), once this transition is over.
    this.early.release();
    if (this.paused) queueMicrotask(() => this.flow());
  }

  private onPublish(p: IPublishPacket): void {
    const alias = this.version === 5 && p.properties?.topicAlias !== undefined;
    const aliases = alias
      ? (this.topicAliases ??= new InboundTopicAliases(this.settings.topicAliasMaximum))
      : undefined;
    const taken = takenPublish(p, aliases);
    if ("reasonCode" in taken) return this.protocolError(taken.reasonCode, taken.reason);
    this.inbound!.onPublish(taken, p.messageId, p.dup);
  }

  /** limits.max_client_buffer (clientBytes.ts). */
  readonly bytes: ClientBytes;

  /** What this tick writes leaves in one buffer and one write when the tick ends (outbox.ts). */
  private readonly outbox: Outbox;
  /** Encodes into the outbox within the client's limits, aliasing topics it allows (packetWriter.ts). */
  private readonly writer: PacketWriter;

  /** false only when the packet is larger than the client allows: dropped and counted. */
  write(packet: Packet): boolean {
    if (this.socket.destroyed) return true;
    return this.writer.write(packet);
  }

  /** The wheel found no packet within the limit. */
  keepaliveExpired(): void {
    this.actor.send({ type: "KEEPALIVE_EXPIRED" });
  }
}
