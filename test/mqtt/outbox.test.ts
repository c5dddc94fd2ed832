import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Outbox } from "../../src/actors/mqtt/outbox.js";
import { encodePublishFast, publishLength } from "../../src/protocol/mqttFastPath.js";

/** A PUBLISH without properties into the outbox, measured as the packet writer measures it. */
function put(
  box: Outbox,
  version: 4 | 5,
  topic: string,
  payload: Uint8Array,
  qos: 0 | 1 | 2,
  retain: boolean,
  dup: boolean,
  id: number | undefined,
) {
  const topicBytes = Buffer.byteLength(topic, "utf8");
  box.publish(
    publishLength(version, topicBytes, payload.byteLength, qos),
    version,
    topic,
    topicBytes,
    payload,
    qos,
    retain,
    dup,
    id,
    undefined,
    0,
  );
}

/** A socket stand-in that keeps what it was given. */
function sink() {
  const chunks: Buffer[] = [];
  return { chunks, destroyed: false, write: (c: Buffer) => chunks.push(Buffer.from(c)) };
}

const step = fc.oneof(
  fc.record({
    kind: fc.constant("publish" as const),
    version: fc.constantFrom(4 as const, 5 as const),
    topic: fc.string({ minLength: 1, maxLength: 40 }),
    payload: fc.uint8Array({ maxLength: 70_000 }),
    qos: fc.constantFrom(0 as const, 1 as const, 2 as const),
    retain: fc.boolean(),
    dup: fc.boolean(),
    messageId: fc.integer({ min: 1, max: 65535 }),
  }),
  fc.record({ kind: fc.constant("bytes" as const), bytes: fc.uint8Array({ minLength: 1, maxLength: 300 }) }),
  fc.record({ kind: fc.constant("flush" as const) }),
);

describe("Outbox: one buffer per tick per socket", () => {
  it("writes, in order and byte for byte, what the packets encode to on their own, across ticks and overflows", () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        const s = sink();
        const box = new Outbox(s);
        const expected: Buffer[] = [];
        for (const st of steps) {
          if (st.kind === "publish") {
            const id = st.qos > 0 ? st.messageId : undefined;
            put(box, st.version, st.topic, st.payload, st.qos, st.retain, st.dup, id);
            expected.push(encodePublishFast(st.version, st.topic, st.payload, st.qos, st.retain, st.dup, id));
          } else if (st.kind === "bytes") {
            box.bytes(st.bytes);
            expected.push(Buffer.from(st.bytes));
          } else box.flush();
        }
        box.flush();
        expect(box.pending()).toBe(0);
        expect(Buffer.concat(s.chunks).equals(Buffer.concat(expected))).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it("after a first tick of that size, writes once per tick however many packets it gathered; holds no buffer when idle", async () => {
    const s = sink();
    const box = new Outbox(s);
    const tick = async () => {
      for (let i = 0; i < 100; i++) put(box, 4, "a/b", Buffer.alloc(100, i), 0, false, false, undefined);
      await new Promise<void>((resolve) => process.nextTick(resolve));
    };
    await tick();
    s.chunks.length = 0;
    for (let i = 0; i < 100; i++) put(box, 4, "a/b", Buffer.alloc(100, i), 0, false, false, undefined);
    expect(s.chunks).toHaveLength(0);
    await new Promise<void>((resolve) => process.nextTick(resolve));
    expect(s.chunks).toHaveLength(1);
    await tick();
    expect(box.pending()).toBe(0);
    expect((box as unknown as { buf: unknown }).buf).toBeUndefined();
  });
});
