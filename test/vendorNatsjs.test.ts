// The nats.js patch of src/vendor/natsjs.ts (issue 16): protocol lines made bytes with
// Buffer.from instead of TextEncoder must queue the very bytes nats.js queued before.
import { DataBuffer, ProtocolHandler } from "@nats-io/nats-core/internal";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { installPublishPatch, upstream } from "../src/vendor/natsjs.js";

type Send = (this: unknown, cmd: string | Uint8Array, ...payloads: Uint8Array[]) => void;

/** What a ProtocolHandler's sendCommand queues for `cmd` and `payloads`, with no connection behind it. */
function queued(send: Send, cmd: string, payloads: Uint8Array[]): Uint8Array {
  const handler = { outbound: new DataBuffer(), pendingLimit: Number.MAX_SAFE_INTEGER, flushPending() {} };
  send.call(handler, cmd, ...payloads);
  return handler.outbound.drain();
}

describe("nats.js protocol lines as Buffer.from bytes", () => {
  it("queues the bytes nats.js's own sendCommand queues, for any line (lone surrogates included)", () => {
    installPublishPatch();
    const patched = (ProtocolHandler.prototype as unknown as { sendCommand: Send }).sendCommand;
    const original = upstream["@nats-io/nats-core ProtocolHandler.sendCommand"] as Send;
    expect(patched).not.toBe(original);
    fc.assert(
      // Code units, not code points: lone surrogates come too (both encoders write U+FFFD).
      fc.property(fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)) }), fc.array(fc.uint8Array({ maxLength: 8 }), { maxLength: 3 }), (subject, payloads) => {
        const line = `HPUB ${subject} 12 34\r\n`;
        expect(Buffer.from(queued(patched, line, payloads))).toEqual(Buffer.from(queued(original, line, payloads)));
      }),
    );
  });
});
