// The acknowledgement bookkeeping of a stored subscription (src/actors/mqtt/ackLedger.ts):
// what a session record keeps of it lets the next connection's consumer, reading from the
// floor, send again exactly what the client did not acknowledge, and nothing it did.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AckLedger } from "../../src/actors/mqtt/ackLedger.js";

const reply = (consumer: string, seq: number) => `$JS.ACK.S.${consumer}.1.${seq}.${seq}.0.0`;

describe("AckLedger", () => {
  it("a resume from what it acknowledged sends again exactly what the client did not acknowledge", () => {
    fc.assert(
      fc.property(
        fc
          .integer({ min: 1, max: 40 })
          .chain((n) => fc.tuple(fc.constant(n), fc.shuffledSubarray(Array.from({ length: n }, (_, i) => i + 1)))),
        ([n, acked]) => {
          const first = new AckLedger(undefined, 256);
          for (let seq = 1; seq <= n; seq++) expect(first.arrive(seq, reply("C", seq))).toBe("deliver");
          for (const seq of acked) expect(first.ack(seq, "C")).toBe(reply("C", seq));
          const kept = first.acknowledged();
          // The next connection's consumer hands back everything above the floor, in order.
          const next = new AckLedger(kept, 256);
          const sent: number[] = [];
          for (let seq = kept.floor + 1; seq <= n; seq++)
            if (next.arrive(seq, reply("D", seq)) === "deliver") sent.push(seq);
          const unacknowledged = Array.from({ length: n }, (_, i) => i + 1).filter((s) => !acked.includes(s));
          expect(sent).toEqual(unacknowledged);
          expect(next.held).toBe(unacknowledged.length);
        },
      ),
    );
  });

  it("a message sent again while held is not sent twice, and its newer reply is the one settled", () => {
    const l = new AckLedger(undefined, 256);
    expect(l.arrive(5, reply("C", 5))).toBe("deliver");
    expect(l.arrive(5, reply("D", 5))).toBe("again");
    expect(l.ack(5, "D")).toBe(reply("D", 5));
    expect(l.ack(5, "D")).toBeUndefined();
    expect(l.held).toBe(0);
  });

  it("what a replaced consumer delivered and the client acknowledged is settled unsent when its successor hands it back", () => {
    const l = new AckLedger(undefined, 256);
    l.arrive(1, reply("C", 1));
    l.arrive(2, reply("C", 2));
    l.ack(2, "D"); // consumer D replaced C while the client held 1 and 2
    expect(l.arrive(1, reply("D", 1))).toBe("again");
    expect(l.arrive(2, reply("D", 2))).toBe("settle");
  });
});
