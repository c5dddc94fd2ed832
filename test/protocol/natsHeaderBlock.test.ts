import { MsgHdrsImpl } from "@nats-io/nats-core/internal";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { plainHeaderPairs } from "../../src/protocol/natsHeaderBlock.js";

/** What the gateway read before: nats.js's decode, then keys()/values(). */
function viaNatsJs(block: Uint8Array): Array<[string, string]> | "throws" {
  try {
    const h = MsgHdrsImpl.decode(block);
    const out: Array<[string, string]> = [];
    for (const k of h.keys()) for (const v of h.values(k)) out.push([k, v]);
    return out;
  } catch {
    return "throws";
  }
}

const block = (lines: string[]) => new TextEncoder().encode(`NATS/1.0\r\n${lines.map((l) => `${l}\r\n`).join("")}\r\n`);

describe("reading NATS header blocks without nats.js", () => {
  it("gives what nats.js gives for plain blocks, grouped by key in first-seen order", () => {
    const key = fc.constantFrom("Mqgw-QoS", "Mqgw-Prop-a", "Mqgw-Prop-b", "Nats-Msg-Id", "x", "A-b");
    const value = fc.string({ maxLength: 12 }).filter((s) => !/[\r\n]/.test(s));
    fc.assert(
      fc.property(fc.array(fc.tuple(key, value), { maxLength: 8 }), (pairs) => {
        const b = block(pairs.map(([k, v]) => `${k}: ${v}`));
        const fast = plainHeaderPairs(b);
        const ref = viaNatsJs(b);
        if (fast !== undefined) expect(fast).toEqual(ref);
        else expect([...b].some((c) => c > 0x7e || (c < 0x20 && c !== 9 && c !== 13 && c !== 10))).toBe(true);
      }),
    );
  });

  it("steps aside for status lines, bad keys and non-ASCII", () => {
    expect(plainHeaderPairs(new TextEncoder().encode("NATS/1.0 503\r\n\r\n"))).toBeUndefined();
    expect(plainHeaderPairs(block(["bad key: 1"]))).toBeUndefined();
    expect(plainHeaderPairs(block(["k: é"]))).toBeUndefined();
    expect(plainHeaderPairs(block([": v"]))).toBeUndefined();
  });

  it("keeps interleaved keys grouped as MsgHdrs does", () => {
    expect(plainHeaderPairs(block(["a: 1", "b: 2", "a: 3"]))).toEqual([
      ["a", "1"],
      ["a", "3"],
      ["b", "2"],
    ]);
  });
});
