import { type Socket, connect as tcpConnect } from "node:net";
import mqtt, { type Packet } from "mqtt-packet";

/**
 * A bare MQTT connection: send exactly the packets (or bytes) a test wants and read
 * exactly what the gateway answers, including DISCONNECT reason codes and closes.
 */
export class RawMqtt {
  readonly packets: Packet[] = [];
  closed = false;
  private readonly waiters: Array<() => void> = [];
  private readonly parser;

  private constructor(
    readonly socket: Socket,
    readonly protocolVersion: 4 | 5,
  ) {
    this.parser = mqtt.parser({ protocolVersion });
    this.parser.on("packet", (p: Packet) => {
      this.packets.push(p);
      this.wake();
    });
    socket.on("data", (d) => this.parser.parse(d));
    socket.on("close", () => {
      this.closed = true;
      this.wake();
    });
    socket.on("error", () => {});
  }

  static open(port: number, protocolVersion: 4 | 5 = 5): Promise<RawMqtt> {
    return new Promise((resolve, reject) => {
      const s = tcpConnect(port, "127.0.0.1", () => resolve(new RawMqtt(s, protocolVersion)));
      s.once("error", reject);
    });
  }

  /** Opens and sends CONNECT; resolves with the CONNACK. */
  static async connected(
    port: number,
    protocolVersion: 4 | 5 = 5,
    connect: Partial<mqtt.IConnectPacket> = {},
  ): Promise<RawMqtt> {
    const c = await RawMqtt.open(port, protocolVersion);
    c.send({
      cmd: "connect",
      protocolId: "MQTT",
      protocolVersion,
      clientId: `raw-${Math.random().toString(16).slice(2)}`,
      clean: true,
      keepalive: 60,
      ...connect,
    } as Packet);
    const ack = await c.next("connack");
    if ((ack as mqtt.IConnackPacket).returnCode || (ack as mqtt.IConnackPacket).reasonCode)
      throw new Error(`CONNACK refused: ${JSON.stringify(ack)}`);
    return c;
  }

  send(packet: Packet): void {
    this.socket.write(mqtt.generate(packet, { protocolVersion: this.protocolVersion }));
  }

  sendBytes(bytes: Buffer): void {
    this.socket.write(bytes);
  }

  /** The next packet of a kind (resolves with undefined when the connection closes first). */
  async next(cmd: Packet["cmd"], timeoutMs = 5_000): Promise<Packet> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.packets.findIndex((p) => p.cmd === cmd);
      if (i >= 0) return this.packets.splice(i, 1)[0]!;
      if (this.closed)
        throw new Error(`connection closed before ${cmd}; got ${this.packets.map((p) => p.cmd).join(",")}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no ${cmd} in ${timeoutMs} ms; got ${this.packets.map((p) => p.cmd).join(",")}`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  async waitClosed(timeoutMs = 5_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error("connection not closed");
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  end(): void {
    this.socket.destroy();
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }
}
