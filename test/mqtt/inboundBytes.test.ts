import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InboundBytes } from "../../src/actors/mqtt/inboundBytes.js";
import { splitFrames } from "../../src/protocol/mqttFrame.js";

/** An MQTT fixed header (type 3, PUBLISH) and `length` body bytes. */
function packet(length: number, fill: number): Buffer {
  const header = [0x30];
  let n = length;
  do {
    let byte = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) byte |= 0x80;
    header.push(byte);
  } while (n > 0);
  return Buffer.concat([Buffer.from(header), Buffer.alloc(length, fill)]);
}

/** Feeds `reads` as the connection does; the packets split out, in order. */
function feed(reads: Buffer[], maxPacket: number): Buffer[] | "too_large" {
  const bytes = new InboundBytes();
  const out: Buffer[] = [];
  for (const r of reads) {
    const frames = splitFrames(bytes.add(r, maxPacket), maxPacket);
    if (frames.kind === "too_large") return "too_large";
    if (frames.kind !== "packets") throw new Error(frames.kind);
    out.push(...frames.packets.map((p) => Buffer.from(p)));
    bytes.keep(frames.rest);
  }
  return out;
}

/** `stream` cut at `cuts` (positions in it). */
function cut(stream: Buffer, cuts: number[]): Buffer[] {
  const at = [...new Set(cuts.map((c) => c % (stream.length + 1)))].sort((a, b) => a - b);
  const reads: Buffer[] = [];
  let from = 0;
  for (const c of [...at, stream.length]) {
    if (c > from) reads.push(stream.subarray(from, c));
    from = Math.max(from, c);
  }
  return reads;
}

describe("InboundBytes: reads joined once a packet is complete", () => {
  it("splits out the same packets, in order, however the stream is cut into reads", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 20_000 }), { minLength: 1, maxLength: 8 }),
        fc.array(fc.nat(), { maxLength: 30 }),
        (lengths, cuts) => {
          const packets = lengths.map((n, i) => packet(n, i));
          const got = feed(cut(Buffer.concat(packets), cuts), 1 << 20);
          if (got === "too_large") throw new Error("too large");
          // Compared as lengths and bytes: a deep equal of large Buffers is slow.
          expect(got.map((p) => p.length)).toEqual(packets.map((p) => p.length));
          expect(Buffer.concat(got).equals(Buffer.concat(packets))).toBe(true);
        },
      ),
    );
  });

  it("a packet whose header says it is too large is refused as soon as the header is read, not held", () => {
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 10 }), (cuts) => {
        const big = packet(5_000, 1).subarray(0, 2_000); // only its start arrives
        expect(feed(cut(big, cuts), 1_000)).toBe("too_large");
      }),
    );
  });
});
