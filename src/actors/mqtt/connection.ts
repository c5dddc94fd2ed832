import { randomBytes } from "node:crypto";
import type { Duplex } from "node:stream";
import { headers as natsHeaders } from "@nats-io/transport-node";
import { Effect, type Scope } from "effect";
import mqtt, { type IConnectPacket, type IPublishPacket, type ISubscribePacket, type IUnsubscribePacket, type Packet } from "mqtt-packet";
import type { Actor } from "xstate";
import type { Logger } from "../../log.js";
import { type ConnectRequest, mqttConnectionMachine, type WillMessage } from "../../machines/mqttConnection.js";
import { ConnackV4, Reason, SubackFailureV4 } from "../../protocol/mqttReasons.js";
import { splitFrames } from "../../protocol/mqttFrame.js";
import { mqttPublishToNats, type InboundPublish, type PublishProperties } from "../../protocol/mqttToNats.js";
import { natsToMqttPublish } from "../../protocol/natsToMqtt.js";
import type { ClientHandle, ClientRegistry } from "../clients.js";
import { awaitDone, startMachine } from "../machineActor.js";
import type { Credentials, NatsBridge, NatsLease } from "../natsBridge.js";
import type { ActorRegistry } from "../registry.js";
import type { Metrics } from "../metrics.js";
import { OutboundFlow } from "./outbound.js";
import type { SessionStore } from "./sessionStore.js";
import type { MqttSettings } from "./settings.js";
import { type ActiveSubscription, closeSubscription, openSubscription, planSubscription } from "./subscriptions.js";

export interface MqttDeps {
  readonly bridge: NatsBridge;
  readonly clients: ClientRegistry;
  readonly registry: ActorRegistry;
  readonly sessions: SessionStore;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly settings: () => MqttSettings;
  readonly accountOf: (lease: NatsLease, username: string | undefined) => Promise<string>;
}

type Machine = Actor<typeof mqttConnectionMachine>;

/**
 * The actor behind one MQTT socket. The machine decides the connection's life; this
 * class carries out its commands and does the per-packet work in plain functions.
 */
class MqttClientConnection {
  private actor!: Machine;
  private readonly parser = mqtt.parser({ protocolVersion: 4 });
  private buffered: Buffer = Buffer.alloc(0);
  private version: 4 | 5 = 4;
  private clientId = "";
  private assignedId: string | undefined;
  private lease: NatsLease | undefined;
  private handle: ClientHandle | undefined;
  private readonly subs = new Map<string, ActiveSubscription>();
  private readonly qos2Received = new Set<number>();
  private inboundPending = 0;
  private outbound!: OutboundFlow;
  private clientMaxPacket = Number.POSITIVE_INFINITY;
  private clientReceiveMax = 65535;
  private readonly topicAliases = new Map<number, string>();
  private readonly deniedPublish = new Set<string>();
  private readonly deniedSubscribe = new Set<string>();
  private readonly unlisten: Array<() => void> = [];
  private lastActivity = 0;
  private keepaliveMs = 0;
  private readonly settings: MqttSettings;
  private readonly log: Logger;

  constructor(
    private readonly socket: Duplex,
    private readonly remote: string,
    private readonly cid: number,
    private readonly deps: MqttDeps,
  ) {
    this.settings = deps.settings();
    this.log = deps.log.child({ cid, remote });
  }

  commands(): Parameters<typeof startMachine<typeof mqttConnectionMachine>>[1]["on"] {
    return {
      acquire_nats: ({ request }) => void this.acquireNats(request),
      connack: ({ returnCode, sessionPresent }) => this.sendConnack(returnCode, sessionPresent),
      serve: () => this.serve(),
      disconnect: ({ reasonCode, reason }) => {
        if (this.version === 5) this.write({ cmd: "disconnect", reasonCode, properties: reason ? { reasonString: reason } : {} } as Packet);
      },
      publish_will: ({ will }) => void this.publishWill(will),
      end_socket: () => this.endSocket(),
      close: () => this.endSocket(),
    };
  }

  start(actor: Machine): void {
    this.actor = actor;
    this.parser.on("packet", (p: Packet) => this.onPacket(p));
    this.parser.on("error", (e: Error) => this.protocolError(Reason.malformedPacket, e.message));
    this.socket.on("data", (chunk: Buffer) => this.onData(chunk));
    this.socket.on("error", () => {});
    this.socket.on("close", () => this.actor.send({ type: "SOCKET_CLOSED" }));
  }

  cleanup(): void {
    for (const u of this.unlisten) u();
    const persist = this.persistSession();
    for (const s of this.subs.values()) closeSubscription(s);
    this.subs.clear();
    if (this.handle) this.deps.clients.remove(this.handle);
    void persist.finally(() => this.lease?.release());
    this.socket.destroy();
  }

  // -- bytes and packets --------------------------------------------------------

  private onData(chunk: Buffer): void {
    if (this.keepaliveMs > 0) {
      // At most a few machine events per keep-alive period, however many packets arrive.
      const now = Date.now();
      if (now - this.lastActivity > this.keepaliveMs / 4) {
        this.lastActivity = now;
        this.actor.send({ type: "ACTIVITY" });
      }
    }
    this.buffered = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
    const frames = splitFrames(this.buffered, this.settings.maxPacketSize);
    if (frames.kind === "too_large") {
      this.buffered = Buffer.alloc(0);
      this.deps.metrics.refused("mqtt", "packet_too_large");
      return this.protocolError(Reason.packetTooLarge, `packet of ${frames.length} bytes exceeds ${this.settings.maxPacketSize}`);
    }
    if (frames.kind === "malformed") {
      this.buffered = Buffer.alloc(0);
      return this.protocolError(Reason.malformedPacket, frames.reason);
    }
    this.buffered = frames.rest;
    for (const p of frames.packets) {
      if (this.actor.getSnapshot().status !== "active") return;
      this.parser.parse(p);
    }
  }

  private onPacket(p: Packet): void {
    const state = this.actor.getSnapshot();
    if (p.cmd === "connect") {
      if (!state.matches("awaitingConnect")) return this.protocolError(Reason.protocolError, "second CONNECT");
      return this.onConnect(p);
    }
    if (!state.matches("serving")) {
      return this.protocolError(Reason.protocolError, `${p.cmd} before CONNECT completed`);
    }
    switch (p.cmd) {
      case "publish":
        return this.onPublish(p);
      case "puback":
        this.outbound.complete(p.messageId ?? 0);
        return;
      case "pubrec":
        if (this.outbound.received(p.messageId ?? 0)) this.write({ cmd: "pubrel", messageId: p.messageId } as Packet);
        else this.write({ cmd: "pubrel", messageId: p.messageId, reasonCode: Reason.packetIdNotFound } as Packet);
        return;
      case "pubcomp":
        this.outbound.complete(p.messageId ?? 0);
        return;
      case "pubrel": {
        const known = this.qos2Received.delete(p.messageId ?? 0);
        this.write({ cmd: "pubcomp", messageId: p.messageId, ...(known || this.version !== 5 ? {} : { reasonCode: Reason.packetIdNotFound }) } as Packet);
        return;
      }
      case "subscribe":
        return void this.onSubscribe(p);
      case "unsubscribe":
        return this.onUnsubscribe(p);
      case "pingreq":
        this.write({ cmd: "pingresp" });
        return;
      case "disconnect":
        this.actor.send({ type: "DISCONNECT", reasonCode: p.reasonCode ?? 0 });
        return;
      default:
        return this.protocolError(Reason.protocolError, `unexpected ${p.cmd}`);
    }
  }

  private protocolError(reasonCode: number, reason: string): void {
    this.log.info({ reason }, "closing MQTT client: protocol error");
    this.actor.send({ type: "PROTOCOL_ERROR", reasonCode, reason });
  }

  // -- CONNECT ------------------------------------------------------------------

  private onConnect(p: IConnectPacket): void {
    if (p.protocolVersion !== 4 && p.protocolVersion !== 5) {
      // [MQTT-3.1.2-2] answer 0x01 and close: MQIsdp (3.1) clients learn they must upgrade.
      this.write({ cmd: "connack", returnCode: ConnackV4.unacceptableProtocolVersion, sessionPresent: false });
      return this.protocolError(Reason.unsupportedProtocolVersion, `protocol level ${p.protocolVersion} is not supported`);
    }
    this.version = p.protocolVersion;
    (this.parser as unknown as { settings: { protocolVersion: number } }).settings.protocolVersion = this.version;
    let clientId = p.clientId ?? "";
    const sessionExpirySec =
      this.version === 5
        ? Math.min(p.properties?.sessionExpiryInterval ?? 0, this.settings.sessionExpiryMaxSec)
        : p.clean
          ? 0
          : this.settings.sessionExpiryMaxSec;
    if (clientId === "") {
      if (this.version === 4 && !p.clean) {
        // [MQTT-3.1.3-8] a persistent session needs a client id.
        this.write({ cmd: "connack", returnCode: ConnackV4.identifierRejected, sessionPresent: false });
        return this.protocolError(Reason.clientIdNotValid, "empty client id with clean session 0");
      }
      clientId = `mqgw-${randomBytes(8).toString("hex")}`;
      this.assignedId = clientId;
    }
    this.clientId = clientId;
    if (this.version === 5) {
      this.clientMaxPacket = p.properties?.maximumPacketSize ?? Number.POSITIVE_INFINITY;
      this.clientReceiveMax = p.properties?.receiveMaximum ?? 65535;
    }
    const request: ConnectRequest = {
      protocolVersion: this.version,
      clientId,
      keepaliveSec: p.keepalive ?? 0,
      cleanStart: p.clean !== false,
      sessionExpirySec,
      ...(p.username !== undefined ? { username: p.username } : {}),
      ...(p.password !== undefined ? { password: p.password.toString("utf8") } : {}),
      ...(p.will ? { will: this.willOf(p.will) } : {}),
    };
    this.actor.send({ type: "CONNECT", request });
  }

  private willOf(w: NonNullable<IConnectPacket["will"]>): WillMessage {
    const { willDelayInterval, ...properties } = w.properties ?? {};
    return {
      topic: w.topic,
      payload: typeof w.payload === "string" ? Buffer.from(w.payload) : w.payload,
      qos: w.qos ?? 0,
      retain: w.retain === true,
      delayMs: this.version === 5 ? (willDelayInterval ?? 0) * 1000 : 0,
      ...(this.version === 5 ? { properties } : {}),
    };
  }

  private async acquireNats(request: ConnectRequest): Promise<void> {
    const creds: Credentials =
      request.username !== undefined
        ? { user: request.username, pass: request.password ?? "" }
        : request.password !== undefined
          ? { token: request.password }
          : {};
    let lease: NatsLease;
    try {
      lease = await this.deps.bridge.acquire(creds);
    } catch (e) {
      const auth = (e as { auth?: boolean }).auth === true;
      this.deps.metrics.refused("mqtt", auth ? "bad_credentials" : "nats_unavailable");
      this.actor.send({ type: "NATS_REFUSED", auth, reason: e instanceof Error ? e.message : String(e) });
      return;
    }
    if (this.actor.getSnapshot().status !== "active") return lease.release();
    this.lease = lease;
    this.unlisten.push(
      lease.onStatus((s) => this.actor.send({ type: s === "up" ? "NATS_UP" : "NATS_DOWN" })),
      lease.onPermissionError((subject, op) => (op === "publish" ? this.deniedPublish : this.deniedSubscribe).add(subject)),
    );
    const account = await this.deps.accountOf(lease, request.username);
    const previous = this.register(account, request);
    let sessionPresent = false;
    if (request.cleanStart) {
      await this.deps.sessions.remove(account, request.clientId);
    } else {
      const stored = await this.deps.sessions.load(account, request.clientId);
      if (stored) {
        sessionPresent = true;
        for (const s of stored.subscriptions) {
          const plan = planSubscription(s.subscription, s.subscriptionId);
          if (plan.ok) this.subs.set(plan.value.filter, openSubscription(lease.nc, plan.value, this.deliver));
        }
      }
    }
    previous?.takeOver();
    this.actor.send({ type: "NATS_READY", sessionPresent, account });
  }

  private register(account: string, request: ConnectRequest): ClientHandle | undefined {
    const lease = this.lease!;
    this.handle = {
      cid: this.cid,
      protocol: "mqtt",
      clientId: request.clientId,
      remote: this.remote,
      since: new Date(),
      account,
      natsServer: () => lease.server(),
      kick: () => this.actor.send({ type: "KICK" }),
      shutdown: () => this.actor.send({ type: "SHUTDOWN" }),
      takeOver: () => this.actor.send({ type: "TAKEN_OVER" }),
    };
    return this.deps.clients.add(this.handle);
  }

  private sendConnack(returnCode: number, sessionPresent: boolean): void {
    if (this.version === 5) {
      const keepalive = this.actor.getSnapshot().context.request?.keepaliveSec ?? 0;
      const serverKeepAlive = keepalive === 0 || keepalive > this.settings.maxKeepaliveSec ? this.settings.maxKeepaliveSec : undefined;
      this.write({
        cmd: "connack",
        reasonCode: returnCode,
        sessionPresent,
        properties: {
          ...(returnCode === 0
            ? {
                receiveMaximum: this.settings.receiveMaximum,
                maximumPacketSize: this.settings.maxPacketSize,
                topicAliasMaximum: this.settings.topicAliasMaximum,
                retainAvailable: true,
                wildcardSubscriptionAvailable: true,
                subscriptionIdentifiersAvailable: true,
                sharedSubscriptionAvailable: true,
                ...(this.assignedId ? { assignedClientIdentifier: this.assignedId } : {}),
                ...(serverKeepAlive !== undefined && this.settings.maxKeepaliveSec > 0 ? { serverKeepAlive } : {}),
              }
            : {}),
        },
      } as Packet);
    } else {
      this.write({ cmd: "connack", returnCode, sessionPresent });
    }
  }

  private serve(): void {
    const req = this.actor.getSnapshot().context.request!;
    const effective =
      this.version === 5 && this.settings.maxKeepaliveSec > 0 && (req.keepaliveSec === 0 || req.keepaliveSec > this.settings.maxKeepaliveSec)
        ? this.settings.maxKeepaliveSec
        : req.keepaliveSec;
    this.keepaliveMs = effective * 1000;
    this.lastActivity = Date.now();
    this.outbound = new OutboundFlow(Math.min(this.clientReceiveMax, 65535), 1000, (packet) => this.write(packet));
    this.deps.metrics.connected("mqtt", this.handle?.account ?? "", +1);
  }

  // -- PUBLISH in -----------------------------------------------------------------

  private onPublish(p: IPublishPacket): void {
    let topic = p.topic;
    const alias = p.properties?.topicAlias;
    if (this.version === 5 && alias !== undefined) {
      if (alias === 0 || alias > this.settings.topicAliasMaximum) return this.protocolError(Reason.topicAliasInvalid, `topic alias ${alias} out of range`);
      if (topic) this.topicAliases.set(alias, topic);
      else {
        const known = this.topicAliases.get(alias);
        if (!known) return this.protocolError(Reason.protocolError, `unknown topic alias ${alias}`);
        topic = known;
      }
    }
    if (p.qos === 2 && this.qos2Received.has(p.messageId ?? 0)) {
      // A resent QoS 2 publish we already passed on: answer again, publish nothing [MQTT-4.3.3-9].
      this.write({ cmd: "pubrec", messageId: p.messageId } as Packet);
      return;
    }
    if (p.qos > 0 && ++this.inboundPending > this.settings.receiveMaximum && this.version === 5) {
      return this.protocolError(Reason.receiveMaximumExceeded, "receive maximum exceeded");
    }
    const inbound: InboundPublish = {
      topic,
      payload: typeof p.payload === "string" ? Buffer.from(p.payload) : p.payload,
      qos: p.qos,
      retain: p.retain,
      properties: p.properties as PublishProperties | undefined,
    };
    this.publishToNats(inbound, p.messageId, false);
  }

  /** Shared by PUBLISH and wills; resolves when the client's answer (if any) is sent. */
  private publishToNats(inbound: InboundPublish, messageId: number | undefined, isWill: boolean): Promise<void> {
    const lease = this.lease;
    const s = this.settings;
    const mapped = mqttPublishToNats(inbound, {
      protocolVersion: this.version,
      clientId: this.clientId,
      routes: s.routes,
      routeList: s.routeList,
      now: Date.now(),
    });
    if (!mapped.ok) {
      this.deps.metrics.refused("mqtt", reasonLabel(mapped.error.reasonCode));
      if (!isWill) this.refusePublish(inbound.qos, messageId, mapped.error.reasonCode, mapped.error.reason, inbound.topic);
      return Promise.resolve();
    }
    if (!lease) return Promise.resolve();
    const { subject, headers, reply } = mapped.value;
    try {
      lease.nc.publish(subject, inbound.payload, {
        ...(headers ? { headers: toNatsHeaders(headers) } : {}),
        ...(reply ? { reply } : {}),
      });
    } catch (e) {
      if (!isWill) this.refusePublish(inbound.qos, messageId, Reason.topicNameInvalid, (e as Error).message, inbound.topic);
      return Promise.resolve();
    }
    this.deps.metrics.messageIn("mqtt", "published");
    if (inbound.qos === 0 && !isWill) return Promise.resolve();
    // Acknowledge only what reached NATS: the flush's PONG comes after any -ERR for it.
    return lease.nc.flush().then(
      () => {
        if (this.deniedPublish.delete(subject)) {
          this.deps.metrics.refused("mqtt", "not_authorized");
          if (!isWill) this.refusePublish(inbound.qos, messageId, Reason.notAuthorized, `not authorized to publish to ${subject}`, inbound.topic);
          return;
        }
        if (!isWill) this.ackPublish(inbound.qos, messageId);
      },
      (e: Error) => {
        if (!isWill) this.refusePublish(inbound.qos, messageId, Reason.unspecified, `NATS flush failed: ${e.message}`, inbound.topic);
      },
    );
  }

  private ackPublish(qos: 0 | 1 | 2, messageId: number | undefined): void {
    if (qos === 0) return;
    this.inboundPending--;
    if (qos === 1) this.write({ cmd: "puback", messageId } as Packet);
    else {
      this.qos2Received.add(messageId ?? 0);
      this.write({ cmd: "pubrec", messageId } as Packet);
    }
  }

  /** The CONTRACT's error table, per QoS and protocol version. */
  private refusePublish(qos: 0 | 1 | 2, messageId: number | undefined, reasonCode: number, reason: string, topic: string): void {
    const invalidTopic = reasonCode === Reason.topicNameInvalid || reasonCode === Reason.topicAliasInvalid;
    if (qos === 0) {
      this.dropOnce(topic, reason);
      // v5: a bad topic on QoS 0 is a protocol error (DISCONNECT 0x90); everything else is dropped.
      if (invalidTopic && this.version === 5) this.protocolError(reasonCode, reason);
      else if (invalidTopic) this.protocolError(reasonCode, reason);
      return;
    }
    this.inboundPending--;
    if (this.version === 4) {
      // 3.1.1 has no negative acknowledgement: closing is the only honest answer.
      return this.protocolError(reasonCode, reason);
    }
    const cmd = qos === 1 ? "puback" : "pubrec";
    this.write({ cmd, messageId, reasonCode, properties: { reasonString: reason } } as Packet);
  }

  private readonly droppedLogged = new Set<string>();
  private dropOnce(topic: string, reason: string): void {
    this.deps.metrics.dropped("mqtt", "refused_qos0");
    if (this.droppedLogged.size < 100 && !this.droppedLogged.has(topic)) {
      this.droppedLogged.add(topic);
      this.log.info({ client_id: this.clientId, topic, reason }, "QoS 0 publish dropped");
    }
  }

  private async publishWill(will: WillMessage): Promise<void> {
    await this.publishToNats(
      { topic: will.topic, payload: Buffer.from(will.payload), qos: will.qos, retain: will.retain, properties: will.properties as PublishProperties },
      undefined,
      true,
    ).catch(() => {});
    this.actor.send({ type: "WILL_DONE" });
  }

  // -- SUBSCRIBE / UNSUBSCRIBE ------------------------------------------------------

  private async onSubscribe(p: ISubscribePacket): Promise<void> {
    const lease = this.lease!;
    const subId = p.properties?.subscriptionIdentifier as number | undefined;
    const granted: number[] = [];
    const opened: ActiveSubscription[] = [];
    for (const s of p.subscriptions) {
      if (this.version === 4 && (s.topic.startsWith("$share/"))) {
        // Shared subscriptions are an MQTT 5 feature; 3.1.1 clients still get them by name.
      }
      const plan = planSubscription(s, subId);
      if (!plan.ok) {
        this.deps.metrics.refused("mqtt", reasonLabel(plan.error.reasonCode));
        granted.push(this.version === 5 ? plan.error.reasonCode : SubackFailureV4);
        continue;
      }
      if (!this.subs.has(s.topic) && this.subs.size >= this.settings.maxSubscriptionsPerClient) {
        granted.push(this.version === 5 ? Reason.quotaExceeded : SubackFailureV4);
        continue;
      }
      const previous = this.subs.get(s.topic);
      if (previous) closeSubscription(previous);
      const active = openSubscription(lease.nc, plan.value, this.deliver);
      this.subs.set(s.topic, active);
      opened.push(active);
      granted.push(s.qos);
    }
    // The server answers a subscription it refuses with -ERR before the flush's PONG.
    await lease.nc.flush().catch(() => {});
    for (const [i, s] of p.subscriptions.entries()) {
      const active = this.subs.get(s.topic);
      if (!active || !opened.includes(active)) continue;
      if (active.subjects.some((subj) => this.deniedSubscribe.delete(subj))) {
        closeSubscription(active);
        this.subs.delete(s.topic);
        granted[i] = this.version === 5 ? Reason.notAuthorized : SubackFailureV4;
        this.deps.metrics.refused("mqtt", "not_authorized");
      }
    }
    this.write({ cmd: "suback", messageId: p.messageId, granted } as Packet);
    void this.persistSessionIfDurable();
  }

  private onUnsubscribe(p: IUnsubscribePacket): void {
    const codes: number[] = [];
    for (const filter of p.unsubscriptions) {
      const s = this.subs.get(filter);
      if (s) {
        closeSubscription(s);
        this.subs.delete(filter);
      }
      codes.push(s ? Reason.success : Reason.noSubscriptionExisted);
    }
    this.write({ cmd: "unsuback", messageId: p.messageId, ...(this.version === 5 ? { granted: codes } : {}) } as Packet);
    void this.persistSessionIfDurable();
  }

  // -- delivery -------------------------------------------------------------------

  private readonly deliver = (
    sub: ActiveSubscription,
    subject: string,
    headers: Iterable<[string, string]> | undefined,
    data: Uint8Array,
    reply: string | undefined,
  ): void => {
    if (!this.outbound) return;
    const out = natsToMqttPublish(subject, headers, data, reply, sub.options, {
      protocolVersion: this.version,
      clientId: this.clientId,
      now: Date.now(),
    });
    if (typeof out === "string") {
      if (out === "expired") this.deps.metrics.dropped("mqtt", "expired");
      return;
    }
    if (data.byteLength + out.topic.length + 64 > this.clientMaxPacket) {
      this.deps.metrics.dropped("mqtt", "too_large_for_client");
      return;
    }
    if (out.qos === 0 && this.socket.writableLength > this.settings.maxQueuedBytes) {
      this.deps.metrics.dropped("mqtt", "slow_consumer");
      return;
    }
    this.outbound.send(out);
    this.deps.metrics.messageOut("mqtt", "delivered");
  };

  private write(packet: Packet): void {
    if (this.socket.destroyed) return;
    this.socket.write(mqtt.generate(packet, { protocolVersion: this.version }));
  }

  private endSocket(): void {
    if (!this.socket.destroyed) this.socket.end();
    // A peer that never reads must not keep the socket (and its buffers) alive.
    setTimeout(() => this.socket.destroy(), 2_000).unref();
  }

  // -- sessions ---------------------------------------------------------------------

  private durable(): boolean {
    const req = this.actor.getSnapshot().context.request;
    return req !== undefined && req.sessionExpirySec > 0;
  }

  private persistSessionIfDurable(): Promise<void> {
    return this.durable() ? this.persistSession() : Promise.resolve();
  }

  private persistSession(): Promise<void> {
    const req = this.actor?.getSnapshot().context.request;
    if (!req || !this.handle || !this.durable()) return Promise.resolve();
    return this.deps.sessions
      .save(this.handle.account, req.clientId, {
        subscriptions: [...this.subs.values()].map((s) => ({
          subscription: {
            topic: s.filter,
            qos: s.options.qos,
            nl: s.options.noLocal,
            rap: s.options.retainAsPublished,
            rh: s.retainHandling,
          },
          subscriptionId: s.options.subscriptionId,
        })),
        expiresAt: Date.now() + req.sessionExpirySec * 1000,
      })
      .catch((e: Error) => this.log.warn({ err: e.message }, "could not save the MQTT session"));
  }

  wasServing(): boolean {
    return this.outbound !== undefined;
  }

  account(): string {
    return this.handle?.account ?? "";
  }
}

function toNatsHeaders(pairs: Array<[string, string]>) {
  const h = natsHeaders();
  for (const [k, v] of pairs) h.append(k, v);
  return h;
}

function reasonLabel(code: number): string {
  switch (code) {
    case Reason.topicNameInvalid:
    case Reason.topicFilterInvalid:
      return "bad_topic";
    case Reason.notAuthorized:
      return "not_authorized";
    case Reason.implementationSpecific:
      return "route_property_missing";
    case Reason.payloadFormatInvalid:
      return "payload_format_invalid";
    default:
      return `reason_${code.toString(16)}`;
  }
}

/** One MQTT connection as a supervised actor: its socket, lease and machine live in its scope. */
export const mqttConnectionActor = (
  socket: Duplex,
  remote: string,
  cid: number,
  deps: MqttDeps,
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const client = new MqttClientConnection(socket, remote, cid, deps);
    const settings = deps.settings();
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        if (client.wasServing()) deps.metrics.connected("mqtt", client.account(), -1);
        client.cleanup();
      }),
    );
    const actor = yield* startMachine(mqttConnectionMachine, {
      id: `mqtt-${cid}`,
      input: { connectTimeoutMs: settings.connectTimeoutMs, maxKeepaliveSec: settings.maxKeepaliveSec },
      registry: deps.registry,
      on: client.commands(),
    });
    client.start(actor);
    yield* awaitDone(actor);
  });
