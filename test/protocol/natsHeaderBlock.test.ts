import { MsgHdrsImpl } from "@nats-io/nats-core/internal";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isStoredCopy } from "../../src/protocol/headers.js";
import {
  encodeHeaderBlock,
  plainBlockSaysQos12,
  plainBlockSaysStoredCopy,
  plainHeaderPairs,
} from "../../src/protocol/natsHeaderBlock.js";

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

/** Header blocks of `key: value` lines and stray text, terminated or not: plain ones and odd ones. */
const anyBlock = (key: fc.Arbitrary<string>, value: fc.Arbitrary<string>) =>
  fc
    .tuple(
      fc.array(
        fc.oneof(
          fc.tuple(key, value).map(([k, v]) => `${k}:${v}`),
          fc.string({ maxLength: 10 }),
        ),
        { maxLength: 6 },
      ),
      fc.boolean(),
    )
    .map(([lines, terminated]) =>
      new TextEncoder().encode(`NATS/1.0\r\n${lines.map((l) => `${l}\r\n`).join("")}${terminated ? "\r\n" : ""}`),
    );

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

/** What the gateway sent before: MsgHdrs with each pair appended, then set(key, value), encoded. */
function encodedByNatsJs(pairs: Array<[string, string]>, key: string, value: string): Uint8Array | "throws" {
  try {
    const h = new MsgHdrsImpl();
    for (const [k, v] of pairs) h.append(k, v);
    h.set(key, value);
    return h.encode();
  } catch {
    return "throws";
  }
}

describe("encoding NATS header blocks without nats.js", () => {
  it("gives nats.js's bytes, or steps aside where nats.js throws", () => {
    const key = fc.oneof(
      fc.constantFrom("Mqgw-QoS", "Mqgw-Prop-a", "Nats-Msg-Id", "x", ""),
      fc.string({ maxLength: 6 }),
    );
    const value = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom(" padded ", "a\r\nb", "é", "1"));
    fc.assert(
      fc.property(fc.array(fc.tuple(key, value), { maxLength: 8 }), value, (pairs, id) => {
        const fast = encodeHeaderBlock(pairs, "Nats-Msg-Id", id);
        const ref = encodedByNatsJs(pairs, "Nats-Msg-Id", id);
        if (fast === undefined) expect(ref).toBe("throws");
        else expect(new Uint8Array(fast)).toEqual(ref);
      }),
      { numRuns: 2000 },
    );
  });

  it("groups repeated keys and puts the id last, replacing an earlier one", () => {
    const text = (b: Uint8Array | undefined) => new TextDecoder().decode(b);
    expect(
      text(
        encodeHeaderBlock(
          [
            ["a", "1"],
            ["Nats-Msg-Id", "old"],
            ["b", "2"],
            ["a", "3"],
          ],
          "Nats-Msg-Id",
          "id",
        ),
      ),
    ).toBe("NATS/1.0\r\na: 1\r\na: 3\r\nb: 2\r\nNats-Msg-Id: id\r\n\r\n");
    expect(encodeHeaderBlock([["bad key", "1"]], "Nats-Msg-Id", "id")).toBeUndefined();
  });
});

describe("telling a QoS 1/2 header block without reading it", () => {
  /** What the session checked before: the header pairs, first key equal to Mqgw-QoS in any case. */
  const viaPairs = (b: Uint8Array) => {
    const pairs = plainHeaderPairs(b);
    if (pairs === undefined) return undefined;
    for (const [k, v] of pairs) if (k.toLowerCase() === "mqgw-qos") return v === "1" || v === "2";
    return false;
  };

  it("answers as the header pairs do, and steps aside where they do", () => {
    const key = fc.constantFrom(
      "Mqgw-QoS",
      "mqgw-qos",
      "MQGW-QOS",
      "Mqgw-QoS ",
      "Mqgw-Qo",
      "Mqgw-Prop-a",
      "x",
      "Mqgw-QoS@",
    );
    const value = fc.oneof(fc.constantFrom("1", "2", "0", " 1 ", "\t2", "12", "", "3"), fc.string({ maxLength: 4 }));
    fc.assert(
      fc.property(anyBlock(key, value), (b) => {
        expect(plainBlockSaysQos12(b)).toBe(viaPairs(b));
      }),
      { numRuns: 3000 },
    );
  });

  it("reads the usual blocks", () => {
    expect(plainBlockSaysQos12(block(["Mqgw-QoS: 1", "Nats-Msg-Id: a"]))).toBe(true);
    expect(plainBlockSaysQos12(block(["Mqgw-QoS: 0"]))).toBe(false);
    expect(plainBlockSaysQos12(block(["Other: 1"]))).toBe(false);
    expect(plainBlockSaysQos12(new TextEncoder().encode("NATS/1.0 503\r\n\r\n"))).toBeUndefined();
  });
});

describe("telling a stored message's core copy from its bytes", () => {
  /** The same question asked of the header pairs (headers.ts). */
  const viaPairs = (b: Uint8Array): boolean | undefined => {
    const pairs = plainHeaderPairs(b);
    return pairs === undefined ? undefined : isStoredCopy(pairs);
  };

  it("answers as the header pairs do (Mqgw-QoS 1/2 and a Nats-Msg-Id), and steps aside where they do", () => {
    const key = fc.constantFrom(
      "Mqgw-QoS",
      "mqgw-qos",
      "Nats-Msg-Id",
      "nats-msg-id",
      "NATS-MSG-ID",
      "Nats-Msg-I",
      "Nats-Msg-Idx",
      "Mqgw-Prop-a",
      "x",
    );
    const value = fc.oneof(fc.constantFrom("1", "2", "0", " 1 ", "abc", ""), fc.string({ maxLength: 4 }));
    fc.assert(
      fc.property(anyBlock(key, value), (b) => {
        expect(plainBlockSaysStoredCopy(b)).toBe(viaPairs(b));
      }),
      { numRuns: 3000 },
    );
  });

  it("reads the gateway's own blocks", () => {
    expect(plainBlockSaysStoredCopy(encodeHeaderBlock([["Mqgw-QoS", "1"]], "Nats-Msg-Id", "abc")!)).toBe(true);
    expect(plainBlockSaysStoredCopy(encodeHeaderBlock([["Mqgw-QoS", "0"]], "Nats-Msg-Id", "abc")!)).toBe(false);
    expect(plainBlockSaysStoredCopy(block(["Mqgw-QoS: 2"]))).toBe(false);
    expect(plainBlockSaysStoredCopy(block(["Nats-Msg-Id: x"]))).toBe(false);
  });
});
