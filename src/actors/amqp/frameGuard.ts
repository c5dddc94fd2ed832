/**
 * Watches the bytes a client sends before rhea parses them: protocol headers and frame
 * sizes and channels. rhea buffers a frame until its declared size has arrived and does
 * not compare it with the max-frame-size it advertised, so a client declaring a 4 GiB
 * frame would make it buffer forever; and it closes without an answer on a header it
 * does not speak, where AMQP 1.0 (part 2, 2.2) asks for our own header first.
 *
 * Pure: it only reads bytes and says what it saw.
 */

/** "AMQP" as the first four bytes of a protocol header. */
const AMQP = 0x414d5150;
const HEADER_LENGTH = 8;
const FRAME_HEADER_LENGTH = 8;
const PROTOCOL_AMQP = 0;
const PROTOCOL_SASL = 3;
const FRAME_AMQP = 0;
const FRAME_SASL = 1;

/** The header the gateway answers a header it cannot accept with: AMQP 1.0.0 over SASL. */
export const SASL_HEADER = Buffer.from([0x41, 0x4d, 0x51, 0x50, PROTOCOL_SASL, 1, 0, 0]);

export type GuardNote =
  /** The client's first protocol header: SASL, or plain AMQP (anonymous, without SASL). */
  | { readonly kind: "header"; readonly sasl: boolean }
  /** A header the gateway does not speak: answer with `answer`, then close the socket. */
  | { readonly kind: "bad_header"; readonly answer: Buffer; readonly description: string }
  /** A frame the connection must be closed for, with this AMQP condition. */
  | { readonly kind: "violation"; readonly condition: string; readonly description: string };

export interface GuardLimits {
  readonly maxFrameSize: number;
  readonly channelMax: number;
  /** ANONYMOUS is offered, so a client may skip SASL and send the AMQP header directly. */
  readonly plainHeaderAllowed: boolean;
}

type Phase = "header" | "sasl" | "amqpHeader" | "amqp" | "stopped";

const NONE: readonly GuardNote[] = [];

export class FrameGuard {
  private phase: Phase = "header";
  /** Bytes of the current frame still to come. */
  private skip = 0;
  /** A header or frame header cut by a chunk boundary. */
  private partial: Buffer | undefined;

  constructor(private readonly limits: GuardLimits) {}

  /** It found a violation (or a bad header): what follows is not read. */
  stopped(): boolean {
    return this.phase === "stopped";
  }

  /** Reads one chunk; returns what the connection must act on (nothing, usually). */
  scan(chunk: Buffer): readonly GuardNote[] {
    if (this.phase === "stopped") return NONE;
    let buf = chunk;
    if (this.partial) {
      buf = Buffer.concat([this.partial, chunk]);
      this.partial = undefined;
    }
    let notes: GuardNote[] | undefined;
    let at = 0;
    while (at < buf.length) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, buf.length - at);
        this.skip -= n;
        at += n;
        continue;
      }
      if (buf.length - at < HEADER_LENGTH) {
        // Protocol headers and frame headers are both 8 bytes.
        this.partial = Buffer.from(buf.subarray(at));
        break;
      }
      // After the SASL outcome the client starts over with the AMQP header.
      if (this.phase === "sasl" && buf.readUInt32BE(at) === AMQP) this.phase = "amqpHeader";
      let note: GuardNote | undefined;
      if (this.phase === "header" || this.phase === "amqpHeader") {
        note = this.header(buf, at);
        at += HEADER_LENGTH;
      } else {
        note = this.frame(buf, at);
      }
      if (!note) continue;
      notes ??= [];
      notes.push(note);
      if (note.kind !== "header") {
        this.phase = "stopped";
        break;
      }
    }
    return notes ?? NONE;
  }

  private header(buf: Buffer, at: number): GuardNote | undefined {
    const id = buf[at + 4];
    const version = buf[at + 5] === 1 && buf[at + 6] === 0 && buf[at + 7] === 0;
    const isAmqp = buf.readUInt32BE(at) === AMQP;
    const shown = isAmqp
      ? `AMQP ${[...buf.subarray(at + 4, at + 8)].join(".")}`
      : `bytes ${buf.subarray(at, at + 8).toString("hex")}`;
    if (this.phase === "amqpHeader") {
      if (!(isAmqp && version && id === PROTOCOL_AMQP))
        return this.refuse(`expected the AMQP header after SASL, got ${shown}`);
      this.phase = "amqp";
      return undefined;
    }
    if (isAmqp && version && id === PROTOCOL_SASL) {
      this.phase = "sasl";
      return { kind: "header", sasl: true };
    }
    if (isAmqp && version && id === PROTOCOL_AMQP && this.limits.plainHeaderAllowed) {
      this.phase = "amqp";
      return { kind: "header", sasl: false };
    }
    if (isAmqp && version && id === PROTOCOL_AMQP) return this.refuse("this gateway needs SASL first");
    return this.refuse(`unsupported protocol header: ${shown}`);
  }

  private refuse(description: string): GuardNote {
    return { kind: "bad_header", answer: SASL_HEADER, description };
  }

  private frame(buf: Buffer, at: number): GuardNote | undefined {
    const size = buf.readUInt32BE(at);
    const doff = buf[at + 4]!;
    const type = buf[at + 5]!;
    if (size < FRAME_HEADER_LENGTH || doff < 2 || doff * 4 > size) {
      return {
        kind: "violation",
        condition: "amqp:connection:framing-error",
        description: `malformed frame header (size ${size}, doff ${doff})`,
      };
    }
    if (size > this.limits.maxFrameSize) {
      return {
        kind: "violation",
        condition: "amqp:connection:framing-error",
        description: `frame of ${size} bytes exceeds max-frame-size ${this.limits.maxFrameSize}`,
      };
    }
    const expected = this.phase === "sasl" ? FRAME_SASL : FRAME_AMQP;
    if (type !== expected) {
      return {
        kind: "violation",
        condition: "amqp:connection:framing-error",
        description: `unexpected frame type ${type}`,
      };
    }
    if (type === FRAME_AMQP) {
      const channel = buf.readUInt16BE(at + 6);
      if (channel > this.limits.channelMax) {
        return {
          kind: "violation",
          condition: "amqp:connection:framing-error",
          description: `channel ${channel} exceeds channel-max ${this.limits.channelMax}`,
        };
      }
    }
    this.skip = size;
    return undefined;
  }
}
