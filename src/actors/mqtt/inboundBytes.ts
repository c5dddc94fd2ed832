const EMPTY = Buffer.alloc(0);

/**
 * The bytes of one MQTT socket not yet split into packets. A packet that arrives in many
 * reads (a CONNECT with a large will, a large PUBLISH) is kept as its reads and joined once,
 * when it is complete: joining at every read made a 900 KB CONNECT arriving in 64 KiB reads
 * allocate 6 MB, and fifty such sockets 300 MB, which the allocator kept (issue 22).
 */
export class InboundBytes {
  private chunks: Buffer[] = [];
  /** Bytes kept. */
  length = 0;

  /**
   * Adds a read. Returns everything kept, joined, once the first packet in it is complete (or
   * its header says it is larger than `maxPacket` or malformed, for the splitter to refuse);
   * nothing while it is not (the reads stay kept: `length` counts them).
   */
  add(chunk: Buffer, maxPacket: number): Buffer {
    this.chunks.push(chunk);
    this.length += chunk.length;
    const needed = this.needed();
    if (needed !== undefined && needed <= maxPacket && this.length < needed) return EMPTY;
    const whole = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.length);
    this.chunks = [];
    this.length = 0;
    return whole;
  }

  /** What is left after the complete packets of what `add` returned: kept for the next read. */
  keep(rest: Buffer): void {
    // Nothing was returned (the reads are still kept), or nothing is left.
    if (rest.length === 0) return;
    // A few bytes of a large read would keep the whole read alive.
    this.chunks = [rest.length * 2 < rest.buffer.byteLength ? Buffer.from(rest) : rest];
    this.length = rest.length;
  }

  /** Whole packets read too early (before the CONNACK) go back before what is kept, to be read again. */
  putBack(packets: readonly Buffer[]): void {
    for (const p of packets) this.length += p.length;
    this.chunks = [...packets, ...this.chunks];
  }

  clear(): void {
    this.chunks = [];
    this.length = 0;
  }

  /** Everything kept, in order, and nothing kept after (the socket moves to another worker). */
  take(): Buffer[] {
    const chunks = this.chunks;
    this.clear();
    return chunks;
  }

  /** The first packet's whole length, from its fixed header; undefined until the header is complete. */
  private needed(): number | undefined {
    let remaining = 0;
    let multiplier = 1;
    let at = 1;
    for (let i = 0; i < 4; i++, at++) {
      const byte = this.byteAt(at);
      if (byte === undefined) return undefined;
      remaining += (byte & 0x7f) * multiplier;
      if ((byte & 0x80) === 0) return at + 1 + remaining;
      multiplier *= 128;
    }
    // A malformed length: the caller's splitter says so.
    return 0;
  }

  private byteAt(index: number): number | undefined {
    for (const c of this.chunks) {
      if (index < c.length) return c[index];
      index -= c.length;
    }
    return undefined;
  }
}
