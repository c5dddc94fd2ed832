// rhea's frames of one tick leave in one write (issue 16): a socket corked by corkPerTick
// hands what was written in one tick to one writev, in order, and the next tick's
// writes to another.
import { Writable } from "node:stream";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { corkPerTick } from "../../src/actors/amqp/corkedWrites.js";

/** A socket stand-in that records each batch it is handed to write. */
function recorder() {
  const batches: string[][] = [];
  const w = new Writable({
    writev(chunks, done) {
      batches.push(chunks.map((c) => String(c.chunk)));
      done();
    },
    write(chunk, _enc, done) {
      batches.push([String(chunk)]);
      done();
    },
  });
  return { w, batches };
}

const nextTurn = () => new Promise<void>((r) => setImmediate(r));

describe("corkPerTick", () => {
  it("gives each tick's writes to the socket as one batch, in order", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(fc.stringMatching(/^[a-z]{1,4}$/), { minLength: 1, maxLength: 6 }), {
          minLength: 1,
          maxLength: 4,
        }),
        async (ticks) => {
          const { w, batches } = recorder();
          corkPerTick(w as never);
          for (const frames of ticks) {
            for (const f of frames) w.write(f);
            await nextTurn();
          }
          expect(batches).toEqual(ticks);
        },
      ),
      { numRuns: 50 },
    );
  });

  it("ends with what was written before the end", async () => {
    const { w, batches } = recorder();
    corkPerTick(w as never);
    w.write("a");
    w.write("b");
    w.end("c");
    await new Promise<void>((r) => w.on("finish", () => r()));
    expect(batches.flat()).toEqual(["a", "b", "c"]);
  });
});
