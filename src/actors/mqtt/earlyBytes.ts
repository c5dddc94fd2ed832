import type { Duplex } from "node:stream";
import type { Logger } from "../../log.js";
import type { Metrics } from "../metrics.js";
import { type ConnectBuffers, ConnectHold } from "./connectBuffers.js";

/**
 * What one MQTT socket holds before its CONNACK, counted with every other socket's in
 * limits.max_connect_buffer: a partial CONNECT, then the packets a client sent right
 * after its CONNECT without waiting (MQTT 3.1.4; docs/decisions/mqtt-wire.md). Past the
 * shared limit the socket is closed, and counted.
 */
export class EarlyBytes {
  private readonly hold: ConnectHold;

  constructor(
    buffers: ConnectBuffers,
    private readonly socket: Duplex,
    private readonly metrics: Metrics,
    /** The connection: its logger is made on first use. */
    private readonly owner: { readonly log: Logger },
  ) {
    this.hold = new ConnectHold(buffers);
  }

  /** The socket holds `bytes` now; false when that would pass the limit (the socket is then destroyed). */
  keep(bytes: number): boolean {
    if (this.hold.hold(bytes)) return true;
    this.metrics.refused("mqtt", "connect_buffer_full");
    this.owner.log.info({ bytes }, "closing a socket before its CONNACK: limits.max_connect_buffer is full");
    this.socket.destroy();
    return false;
  }

  release(): void {
    this.hold.release();
  }
}
