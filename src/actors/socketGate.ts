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

  constructor(
    private readonly max: () => number,
    private readonly onRefused: (protocol: GateProtocol) => void,
  ) {}

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
    socket.once("close", () => {
      this.count--;
      this.open[protocol].delete(socket);
      this.closedBytes[protocol].read += socket.bytesRead;
      this.closedBytes[protocol].written += socket.bytesWritten;
    });
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
