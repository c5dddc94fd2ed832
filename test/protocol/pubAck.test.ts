import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { readPubAck } from "../../src/protocol/pubAck.js";

const enc = (s: string) => new TextEncoder().encode(s);

/** What the gateway read before: JSON.parse, then the fields a stored publish uses. */
function viaJson(text: string): { stream: string; seq: number; duplicate: boolean } | "other" {
  try {
    const v = JSON.parse(text) as { stream?: unknown; seq?: unknown; duplicate?: unknown; error?: unknown };
    if (v === null || typeof v !== "object" || v.error || typeof v.stream !== "string" || !v.stream) return "other";
    return { stream: v.stream, seq: typeof v.seq === "number" ? v.seq : 0, duplicate: v.duplicate === true };
  } catch {
    return "other";
  }
}

const streamName = fc.string({ minLength: 1, maxLength: 16 }).filter((s) => !/[\s"\\]/.test(s));
const seq = fc.oneof(
  fc.nat(),
  fc.maxSafeNat().map((n) => Math.floor(n / 1000)),
);

describe("reading a JetStream publish ack without JSON.parse", () => {
  it("reads every ack nats-server writes, as JSON.parse does", () => {
    fc.assert(
      fc.property(streamName, seq, fc.boolean(), (stream, n, duplicate) => {
        const text = JSON.stringify(duplicate ? { stream, seq: n, duplicate: true } : { stream, seq: n });
        const fast = readPubAck(enc(text));
        const ref = viaJson(text);
        // ASCII names are read by hand; others fall back to JSON.parse.
        if (/^[\x21-\x7e]+$/.test(stream)) expect(fast).toEqual(ref);
        else expect(fast).toBeUndefined();
      }),
    );
  });

  it("never reads anything differently from JSON.parse: it reads it the same or leaves it to JSON.parse", () => {
    const piece = fc.constantFrom(
      '{"stream":"',
      "S",
      "ORDERS",
      '","seq":',
      "0",
      "7",
      "12",
      '"',
      ",",
      '"duplicate":true',
      '"duplicate":false',
      "}",
      " ",
      '"domain":"d"',
      '"error":{"code":503}',
      "\\",
      "é",
    );
    const arbitraryText = fc.oneof(
      fc.array(piece, { maxLength: 10 }).map((p) => p.join("")),
      fc.string(),
      fc.json(),
    );
    fc.assert(
      fc.property(arbitraryText, (text) => {
        const fast = readPubAck(enc(text));
        if (fast !== undefined) expect(fast).toEqual(viaJson(text));
      }),
    );
  });

  it("leaves errors and other shapes to JSON.parse", () => {
    for (const text of [
      '{"error":{"code":503,"description":"no responders"}}',
      '{"stream":"S","domain":"hub","seq":3}',
      '{"stream":"S", "seq":3}',
      '{"stream":"S","seq":03}',
      '{"stream":"S","seq":3,"duplicate":false}',
      '{"stream":"","seq":3}',
      "",
    ])
      expect(readPubAck(enc(text))).toBeUndefined();
    expect(readPubAck(enc('{"stream":"S","seq":3,"duplicate":true}'))).toEqual({
      stream: "S",
      seq: 3,
      duplicate: true,
    });
    expect(readPubAck(enc('{"stream":"T","seq":0}'))).toEqual({ stream: "T", seq: 0, duplicate: false });
  });
});
