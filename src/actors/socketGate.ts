import type { Socket } from "node:net";

export type GateProtocol = "mqtt" | "amqp";

/**
 * `limits.max_connections` over accepted sockets, MQTT (TCP, TLS, WebSocket) and AMQP
 * together, from accept to close: a socket that never finishes CONNECT / open holds a
 * place as much as a served client does, so a flood of half-open sockets cannot get
 * past the limit (docs/decisions/faults.md). Counted on the raw TCP socket, before TLS
 * or the WebSocket upgrade, and released by its `close` event, which Node emits once
 * per socket whatever ended it (peer, error, timeout, kick, shutdown).
 */
export class SocketGate {
  private count = 0;
  /** Open sockets, and the bytes of those closed, per protocol: Node counts each socket's bytes itself. */
  private readonly open = { mqtt: new Set<Socket>(), amqp: new Set<Socket>() };
  private readonly closedBytes = { mqtt: { read: 0, written: 0 }, amqp: { read: 0, written: 0 } };
  /**
   * One `close` listener per protocol for all its sockets (Node calls it with the socket as
   * `this`): a `once` wrapper and a closure per socket were about 0.2 KiB of each idle connection.
   */
  private readonly onClose: Record<GateProtocol, (this: Socket) => void> = {
    mqtt: this.closer("mqtt"),
    amqp: this.closer("amqp"),
  };

  constructor(
    private readonly max: () => number,
    private readonly onRefused: (protocol: GateProtocol) => void,
  ) {}

  private closer(protocol: GateProtocol): (this: Socket) => void {
    const gate = this;
    return function (this: Socket) {
      // `close` comes once per socket; the set tells a socket counted here from any other.
      if (!gate.open[protocol].delete(this)) return;
      gate.count--;
      gate.closedBytes[protocol].read += this.bytesRead;
      gate.closedBytes[protocol].written += this.bytesWritten;
    };
  }

  /** False (and the socket destroyed) when the limit is reached. */
  admit(socket: Socket, protocol: GateProtocol): boolean {
    const max = this.max();
    if (max > 0 && this.count >= max) {
      this.onRefused(protocol);
      socket.destroy();
      return false;
    }
    this.count++;
    this.open[protocol].add(socket);
    socket.on("close", this.onClose[protocol]);
    return true;
  }

  /** Bytes read and written on client sockets so far, per protocol (a metrics scrape). */
  bytes(): Record<GateProtocol, { read: number; written: number }> {
    const out = { mqtt: { ...this.closedBytes.mqtt }, amqp: { ...this.closedBytes.amqp } };
    for (const protocol of ["mqtt", "amqp"] as const) {
      for (const s of this.open[protocol]) {
        out[protocol].read += s.bytesRead;
        out[protocol].written += s.bytesWritten;
      }
    }
    return out;
  }

  /** Sockets open now (accepted, not yet closed). */
  size(): number {
    return this.count;
  }
}
