// The hand-written transfer frame (src/vendor/rheaFrames.ts) against rhea's own writer:
// rhea's reader must find the same fields and payload in both, for any field values.
import { createRequire } from "node:module";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { installFramePatches, upstreamFrames } from "../src/vendor/rheaFrames.js";

const req = createRequire(import.meta.url);
interface Frame {
  channel: number;
  type: number;
  performative?: Record<string, unknown> & { constructor: { toString(): string } };
  payload?: Buffer;
}
const frames = req("rhea/lib/frames.js") as {
  transfer(fields: Record<string, unknown>): unknown;
  write_frame(f: { channel: number; type: number; performative: unknown; payload?: Buffer }): Buffer;
  read_frame(b: Buffer): Frame;
  TYPE_AMQP: number;
};
const rheaTransfer = upstreamFrames["lib/frames.js transfer"] as typeof frames.transfer;
const rheaWrite = upstreamFrames["lib/frames.js write_frame"] as typeof frames.write_frame;

const rheaRead = upstreamFrames["lib/frames.js read_frame"] as typeof frames.read_frame;

const FIELDS = [
  "handle",
  "delivery_id",
  "delivery_tag",
  "message_format",
  "settled",
  "more",
  "rcv_settle_mode",
  "state",
  "resume",
  "aborted",
  "batchable",
] as const;
const seen = (f: Frame) => ({
  channel: f.channel,
  type: f.type,
  name: String(f.performative?.constructor),
  ...Object.fromEntries(FIELDS.map((k) => [k, f.performative?.[k] ?? null])),
  payload: f.payload ? Buffer.from(f.payload).toString("hex") : "",
});
/** Exactly what rhea's getters give, null and undefined told apart. */
const exact = (f: Frame) => FIELDS.map((k) => (f.performative?.[k] === undefined ? "undefined" : f.performative[k]));

const uint = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 255 }), fc.integer({ min: 256, max: 0xffffffff }));
const transferFields = fc.record(
  {
    handle: uint,
    delivery_id: uint,
    delivery_tag: fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a)),
    message_format: uint,
    settled: fc.boolean(),
    more: fc.boolean(),
  },
  { requiredKeys: ["handle", "delivery_id", "delivery_tag"] },
);

describe("rhea's transfer frame, written by hand", () => {
  installFramePatches();

  it("reads back as rhea's own encoding of the same transfer does", () => {
    fc.assert(
      fc.property(
        transferFields,
        fc.integer({ min: 0, max: 0xffff }),
        fc.option(
          fc.uint8Array({ maxLength: 600 }).map((a) => Buffer.from(a)),
          { nil: undefined },
        ),
        (fields, channel, payload) => {
          const ours = frames.write_frame({
            channel,
            type: frames.TYPE_AMQP,
            performative: frames.transfer(fields),
            payload,
          });
          const theirs = rheaWrite({ channel, type: frames.TYPE_AMQP, performative: rheaTransfer(fields), payload });
          expect(ours.readUInt32BE(0)).toBe(ours.length);
          expect(seen(frames.read_frame(ours))).toEqual(seen(frames.read_frame(theirs)));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("a transfer reads as rhea's reader reads it, whoever wrote it and whatever it holds", () => {
    const more = fc.record(
      {
        rcv_settle_mode: fc.constantFrom(0, 1),
        resume: fc.boolean(),
        aborted: fc.boolean(),
        batchable: fc.boolean(),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(
        transferFields,
        more,
        fc.integer({ min: 0, max: 0xffff }),
        fc.option(
          fc.uint8Array({ maxLength: 600 }).map((a) => Buffer.from(a)),
          { nil: undefined },
        ),
        fc.boolean(),
        (fields, extra, channel, payload, handWritten) => {
          const all = { ...fields, ...extra };
          const bytes = handWritten
            ? frames.write_frame({ channel, type: frames.TYPE_AMQP, performative: frames.transfer(all), payload })
            : rheaWrite({ channel, type: frames.TYPE_AMQP, performative: rheaTransfer(all), payload });
          const ours = frames.read_frame(bytes);
          const theirs = rheaRead(bytes);
          expect(seen(ours)).toEqual(seen(theirs));
          expect(exact(ours)).toEqual(exact(theirs));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("a plain transfer is read by hand, not through rhea's composite", () => {
    const bytes = rheaWrite({
      channel: 1,
      type: frames.TYPE_AMQP,
      performative: rheaTransfer({
        handle: 0,
        delivery_id: 9,
        delivery_tag: Buffer.from("1"),
        message_format: 0,
        settled: true,
      }),
      payload: Buffer.from("m"),
    });
    expect(Object.hasOwn(frames.read_frame(bytes).performative!, "value")).toBe(false);
    expect(Object.hasOwn(rheaRead(bytes).performative!, "value")).toBe(true);
  });

  it("a transfer with a field the hand writer does not know is rhea's", () => {
    const fields = { handle: 1, delivery_id: 2, delivery_tag: Buffer.from("t"), aborted: true };
    const f = frames.read_frame(
      frames.write_frame({ channel: 0, type: frames.TYPE_AMQP, performative: frames.transfer(fields) }),
    );
    expect(f.performative?.aborted).toBe(true);
    expect(f.performative?.delivery_id).toBe(2);
  });

  it("any other frame is rhea's too", () => {
    const flow = (req("rhea/lib/frames.js") as { flow(f: Record<string, unknown>): unknown }).flow({
      incoming_window: 10,
      next_outgoing_id: 3,
      outgoing_window: 10,
      link_credit: 7,
    });
    const f = frames.read_frame(frames.write_frame({ channel: 5, type: frames.TYPE_AMQP, performative: flow }));
    expect(f.channel).toBe(5);
    expect(f.performative?.link_credit).toBe(7);
  });
});
