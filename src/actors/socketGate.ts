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
    socket.once("close", () => {
      this.count--;
    });
    return true;
  }

  /** Sockets open now (accepted, not yet closed). */
  size(): number {
    return this.count;
  }
}
