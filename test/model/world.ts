import type { NatsConnection } from "@nats-io/transport-node";
import mqtt, { type IClientOptions, type IDisconnectPacket, type MqttClient } from "mqtt";
import { publishTopicToSubject } from "../../src/protocol/topic.js";
import { type Name, type Qos, STORED_TOPIC } from "./sessionModel.js";

/** Every wait in a sequence is on an event, bounded by this. */
export const WAIT_MS = 10_000;
const PROBE = "probe:";

/** What the shared gateway and nats-server offer each sequence. */
export interface Shared {
  readonly mqttPort: number;
  readonly gatewayId: string;
  /** A plain NATS connection (probes, admin requests); null while NATS restarts. */
  nats(): NatsConnection;
  /** Admin requests are answered (the gateway has admin credentials). */
  readonly admin: boolean;
  restartNats(): Promise<void>;
}

interface Connection {
  readonly client: MqttClient;
  readonly version: 4 | 5;
  /** Set once the socket has closed. */
  closed: boolean;
  /** The server's DISCONNECT, if it sent one (MQTT 5). */
  disconnect?: IDisconnectPacket;
  /** Once the connection that replaced it has its CONNACK: how many payloads the sequence had published. */
  replacedAfter?: number;
  readonly waiters: Array<() => void>;
}

/**
 * The real side of one command sequence: mqtt.js clients against the real gateway,
 * each message checked as it arrives against the deliveries the model predicted.
 * Client ids and topics are unique to the sequence, so sequences share one gateway.
 */
export class World {
  private static sequences = 0;
  readonly seq = `s${++World.sequences}`;
  private readonly connections = new Map<Name, Connection>();
  private readonly received = new Map<string, Map<Name, Qos[]>>();
  private readonly expected = new Map<string, Map<Name, Qos>>();
  private readonly probes = new Set<string>();
  /** QoS 0 payloads by topic index: nothing acknowledges them, so they may still be on their way. */
  private readonly unacknowledged = new Map<string, number>();
  readonly problems: string[] = [];
  private published = 0;

  constructor(readonly shared: Shared) {}

  clientId(name: Name): string {
    return `mb-${this.seq}-${name}`;
  }

  /** Topic 1 lies in the stream bound for the test (`mbs.>`); topic 0 is live. */
  topic(index: number): string {
    return `${index === STORED_TOPIC ? "mbs" : "mb"}/${this.seq}/t${index}`;
  }

  nextPayload(): string {
    return `${this.seq}:${++this.published}`;
  }

  async connect(name: Name, clean: boolean, version: 4 | 5): Promise<mqtt.IConnackPacket> {
    const options: IClientOptions = {
      host: "127.0.0.1",
      port: this.shared.mqttPort,
      clientId: this.clientId(name),
      clean,
      protocolVersion: version,
      reconnectPeriod: 0,
      connectTimeout: WAIT_MS,
      keepalive: 60,
      ...(version === 5 ? { properties: { sessionExpiryInterval: clean ? 0 : 300 } } : {}),
    };
    const client = mqtt.connect(options);
    const conn: Connection = { client, version, closed: false, waiters: [] };
    const wake = () => {
      for (const w of conn.waiters.splice(0)) w();
    };
    client.on("message", (_topic, payload, packet) =>
      this.onMessage(name, conn, payload.toString(), packet.qos as Qos),
    );
    client.on("disconnect", (packet) => {
      conn.disconnect = packet;
      wake();
    });
    client.on("close", () => {
      conn.closed = true;
      wake();
    });
    client.on("error", () => {});
    // Current before CONNACK: a resumed session's stored messages may come in the same read.
    this.connections.set(name, conn);
    return new Promise<mqtt.IConnackPacket>((resolve, reject) => {
      client.once("connect", resolve);
      client.once("close", () => reject(new Error(`${name}: closed before CONNACK`)));
    });
  }

  /** The current connection of a client (the test has connected it). */
  private current(name: Name): Connection {
    const c = this.connections.get(name);
    if (!c) throw new Error(`${name} is not connected`);
    return c;
  }

  /** Waits until the client's current connection has closed; answers the server's DISCONNECT reason, if any. */
  async closed(name: Name): Promise<number | undefined> {
    const conn = this.current(name);
    await until(conn, () => conn.closed, `${name}'s connection to close`);
    return conn.disconnect?.reasonCode;
  }

  /** The connection a new one with the same client id replaced: it must close, and see nothing more. */
  retire(name: Name): Connection | undefined {
    const old = this.connections.get(name);
    this.connections.delete(name);
    return old;
  }

  /**
   * The connection that replaced `old` has its CONNACK, so the server has taken `old` over:
   * anything published from now on must not reach it. What was published before may still
   * be on its way there (through NATS and back), as on any connection about to close.
   */
  replaced(old: Connection): void {
    old.replacedAfter = this.published;
  }

  async waitClosed(conn: Connection, what: string): Promise<number | undefined> {
    await until(conn, () => conn.closed, what);
    return conn.disconnect?.reasonCode;
  }

  async subscribe(name: Name, topic: number, qos: Qos): Promise<number> {
    const granted = await this.current(name).client.subscribeAsync(this.topic(topic), { qos });
    return granted[0]!.qos;
  }

  async unsubscribe(name: Name, topic: number): Promise<void> {
    await this.current(name).client.unsubscribeAsync(this.topic(topic));
  }

  /** Publishes a payload after telling the checker who may get it (now, or when their session resumes). */
  async publish(name: Name, topic: number, qos: Qos, payload: string, allowed: Map<Name, Qos>): Promise<void> {
    this.expected.set(payload, allowed);
    this.received.set(payload, new Map());
    if (qos === 0) this.unacknowledged.set(payload, topic);
    await this.current(name).client.publishAsync(this.topic(topic), payload, { qos });
  }

  /** Waits until each of `names` has the payload; answers the QoS of every copy each got. */
  async delivered(payload: string, names: Iterable<Name>): Promise<Map<Name, Qos[]>> {
    const got = this.received.get(payload)!;
    for (const name of names) {
      const conn = this.current(name);
      await until(conn, () => (got.get(name)?.length ?? 0) > 0, `${payload} to reach ${name}`);
    }
    return got;
  }

  disconnectCleanly(name: Name): Promise<void> {
    return this.current(name).client.endAsync();
  }

  dropSocket(name: Name): void {
    this.current(name).client.stream.destroy();
  }

  /**
   * A resumed session reopens its subscriptions only after CONNACK, so a message
   * published at once may find none (docs/decisions/mqtt-sessions.md). Probes are
   * published straight to NATS until one arrives on every subscribed topic.
   */
  async resumed(name: Name, topics: readonly number[]): Promise<void> {
    const conn = this.current(name);
    for (const topic of topics) {
      const subject = publishTopicToSubject(this.topic(topic));
      if (!subject.ok) throw new Error(`no subject for ${this.topic(topic)}`);
      const payload = `${PROBE}${this.seq}:${name}:${topic}`;
      const deadline = Date.now() + WAIT_MS;
      while (!this.probes.has(payload)) {
        if (Date.now() > deadline)
          throw new Error(`${name}'s resumed subscription to ${this.topic(topic)} never opened`);
        this.shared.nats().publish(subject.value, payload);
        await until(conn, () => this.probes.has(payload), "", 100).catch(() => {});
      }
    }
  }

  /**
   * A subscription to `topic` is about to open. A QoS 0 message published there
   * earlier may not have been routed yet (no PUBACK says when it was, and MQTT orders
   * nothing across connections), so getting it now is not wrong.
   */
  opening(name: Name, topic: number): void {
    for (const [payload, t] of this.unacknowledged) {
      const allowed = this.expected.get(payload)!;
      if (t === topic && !allowed.has(name)) allowed.set(name, 0);
    }
  }

  /** Ends every connection of the sequence, whatever state it is in. */
  async close(): Promise<void> {
    await Promise.all([...this.connections.values()].map((c) => c.client.endAsync(true).catch(() => {})));
    this.connections.clear();
  }

  private onMessage(name: Name, conn: Connection, payload: string, qos: Qos): void {
    if (payload.startsWith(PROBE)) {
      this.probes.add(payload);
    } else if (this.connections.get(name) !== conn) {
      const n = Number(payload.slice(payload.lastIndexOf(":") + 1));
      if (conn.replacedAfter !== undefined && n > conn.replacedAfter)
        this.problems.push(`${payload} delivered to ${name} on a connection taken over before it was published`);
    } else if (!this.expected.get(payload)?.has(name)) {
      this.problems.push(`${payload} delivered to ${name}, which the model says must not get it`);
    } else {
      const got = this.received.get(payload)!;
      got.set(name, [...(got.get(name) ?? []), qos]);
    }
    for (const w of conn.waiters.splice(0)) w();
  }
}

/** Waits, without polling, until `done` holds after one of the connection's events. */
function until(conn: Connection, done: () => boolean, what: string, timeoutMs = WAIT_MS): Promise<void> {
  if (done()) return Promise.resolve();
  return new Promise((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      settled = true;
      reject(new Error(`timed out waiting for ${what}`));
    }, timeoutMs);
    const check = () => {
      if (settled) return;
      if (done()) {
        settled = true;
        clearTimeout(timer);
        resolve();
      } else conn.waiters.push(check);
    };
    conn.waiters.push(check);
  });
}
