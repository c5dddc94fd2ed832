/**
 * mqtt-packet's encoder, made safe to hand anything. Its `generate` gathers chunks in an
 * emitter that emits `error` on a field it refuses (an unhandled `error` ends the
 * process), and a two-byte length it has no cached buffer for (a string over 65,535
 * bytes) becomes a missing chunk that cuts the packet short behind a fixed header
 * claiming the full length: the next packet's bytes are then read as this one's, and a
 * payload crafted for that parses as a packet of the attacker's choosing. Here a refusal
 * or a missing chunk is an Error, and the fixed header's remaining length is checked
 * against the bytes written: a packet goes out whole or not at all.
 */
import { EventEmitter } from "node:events";
import mqtt, { type Packet } from "mqtt-packet";

class Chunks extends EventEmitter {
  readonly parts: Buffer[] = [];
  failed: Error | undefined;

  write(chunk: Buffer | string | undefined): boolean {
    if (chunk === undefined || chunk === null) this.failed ??= new Error("a field longer than MQTT can carry");
    else this.parts.push(typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk);
    return true;
  }

  destroy(e?: Error): void {
    if (e) this.failed ??= e;
  }
}

export function encodeMqttPacket(packet: Packet, protocolVersion: 4 | 5): Buffer | Error {
  const sink = new Chunks();
  try {
    mqtt.writeToStream(packet, sink as unknown as NodeJS.WritableStream, { protocolVersion });
  } catch (e) {
    return e instanceof Error ? e : new Error(String(e));
  }
  if (sink.failed) return sink.failed;
  const bytes = Buffer.concat(sink.parts);
  return wholePacket(bytes) ? bytes : new Error("encoded length does not match the packet");
}

/** The fixed header's remaining length (a variable byte integer after the first byte) is exactly what follows it. */
export function wholePacket(bytes: Uint8Array): boolean {
  let length = 0;
  let multiplier = 1;
  for (let i = 1; i < 5 && i < bytes.length; i++) {
    const b = bytes[i]!;
    length += (b & 0x7f) * multiplier;
    if ((b & 0x80) === 0) return bytes.length === i + 1 + length;
    multiplier *= 128;
  }
  return false;
}
