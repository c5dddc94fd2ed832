/**
 * The bytes MQTT sockets hold before their CONNECT is complete, counted together. One
 * socket may hold up to mqtt.max_packet_size (a CONNECT may carry a large will), but
 * fifty sockets each holding most of one would hold 50 of them until connect_timeout:
 * limits.max_connect_buffer bounds the sum, and a socket that would pass it is closed.
 */
export class ConnectBuffers {
  private held = 0;

  constructor(private readonly limit: () => number) {}

  /** A socket's partial CONNECT goes from `from` to `to` bytes; false (nothing counted) when the total would pass the limit. */
  resize(from: number, to: number): boolean {
    const next = this.held - from + to;
    if (to > from && next > this.limit()) return false;
    this.held = next;
    return true;
  }

  total(): number {
    return this.held;
  }
}

/** One socket's share of the ConnectBuffers: what its partial CONNECT holds now. */
export class ConnectHold {
  private held = 0;

  constructor(private readonly buffers: ConnectBuffers) {}

  /** The partial CONNECT is `bytes` long now; false when that would pass the shared limit (nothing is held then). */
  hold(bytes: number): boolean {
    if (this.buffers.resize(this.held, bytes)) {
      this.held = bytes;
      return true;
    }
    this.release();
    return false;
  }

  release(): void {
    this.buffers.resize(this.held, 0);
    this.held = 0;
  }
}
