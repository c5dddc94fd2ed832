// A subscription's header reader remembers the last plain block (issue 16): it must answer
// what reading each message afresh answers, whatever came before it.
import { MsgHdrsImpl } from "@nats-io/nats-core/internal";
import type { MsgHdrs } from "@nats-io/transport-node";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { headerPairsOf, headerPairsReader } from "../../src/actors/client/headerPairs.js";

/** One read buffer for every message, as a reused socket buffer would be: a reader that kept a view of it would answer stale pairs. */
const shared = new Uint8Array(4096);

/** What nats.js's MsgImpl keeps of a message (vendor/natsjs.ts reads `_msg.hdr` and `_rdata`). */
function message(block: string | null, payload: string): { headers?: MsgHdrs } {
  const te = new TextEncoder();
  const h = block === null ? new Uint8Array(0) : te.encode(block);
  const p = te.encode(payload);
  shared.set(h, 0);
  shared.set(p, h.length);
  const raw = shared.subarray(0, h.length + p.length);
  let decoded: MsgHdrs | undefined;
  return {
    _msg: { hdr: block === null ? -1 : h.length },
    _rdata: raw,
    get headers() {
      if (block === null) return undefined;
      return (decoded ??= MsgHdrsImpl.decode(te.encode(block)) as unknown as MsgHdrs);
    },
  } as unknown as { headers?: MsgHdrs };
}

const blocks = fc.constantFrom<string | null>(
  null,
  "NATS/1.0\r\nMqgw-Mqtt-Client-Id: a\r\n\r\n",
  "NATS/1.0\r\nMqgw-Mqtt-Client-Id: b\r\n\r\n",
  "NATS/1.0\r\nMqgw-Mqtt-Client-Id: ab\r\n\r\n",
  "NATS/1.0\r\nMqgw-QoS: 1\r\nMqgw-Mqtt-Client-Id: a\r\n\r\n",
  "NATS/1.0\r\nx: 1\r\ny: 2\r\nx: 3\r\n\r\n",
  "NATS/1.0 503\r\n\r\n",
  "NATS/1.0\r\nMqgw-Prop-k: caf\u00e9\r\n\r\n",
);

describe("a subscription's header reader", () => {
  it("answers for each message what reading it afresh answers", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(blocks, fc.string({ maxLength: 6 })), { maxLength: 20 }), (msgs) => {
        const read = headerPairsReader();
        for (const [block, payload] of msgs) {
          const got = read(message(block, payload));
          expect(got).toEqual(headerPairsOf(message(block, payload)));
        }
      }),
    );
  });
});
