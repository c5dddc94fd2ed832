// Issue 22, item 5: what the gateway writes is what a strict AMQP peer reads. Azure's
// go-amqp refuses a composite with more list elements than its type has fields; its
// receivers could not attach because the gateway answered with a 11-field target (rhea
// shared one array among every empty list it read, and the gateway's echo of an empty
// source filled it). The strict reader (test/helpers/strictAmqp.ts) reads every frame the
// gateway writes in every test through startGateway's tap; here, the reader itself, and
// a client writing go-amqp's bytes.
import { connect as tcpConnect } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { COMPOSITE_FIELDS, readValue, StrictAmqpError, StrictAmqpStream, type Value } from "../helpers/strictAmqp.js";
import { AmqpClient } from "./rheaClient.js";

// -- AMQP values as go-amqp writes them (internal/encoding/encode.go) --------------------

const bytes = (...b: number[]) => Buffer.from(b);
const NULL = bytes(0x40);
const str = (s: string) => Buffer.concat([bytes(0xa1, Buffer.byteLength(s)), Buffer.from(s)]);
const uint = (n: number) => (n === 0 ? bytes(0x43) : bytes(0x52, n));
const bool = (b: boolean) => bytes(b ? 0x41 : 0x42);
/** A composite: list0 when it has no fields, else list32 (go-amqp's MarshalComposite). */
function composite(code: number, fields: Buffer[]): Buffer {
  if (fields.length === 0) return bytes(0x00, 0x53, code, 0x45);
  const body = Buffer.concat(fields);
  const head = Buffer.alloc(9);
  head[0] = 0xd0;
  head.writeUInt32BE(body.length + 4, 1);
  head.writeUInt32BE(fields.length, 5);
  return Buffer.concat([bytes(0x00, 0x53, code), head, body]);
}
function frame(body: Buffer, channel = 0, type = 0): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(8 + body.length, 0);
  head[4] = 2;
  head[5] = type;
  head.writeUInt16BE(channel, 6);
  return Buffer.concat([head, body]);
}
const AMQP_HEADER = bytes(0x41, 0x4d, 0x51, 0x50, 0, 1, 0, 0);

describe("the strict reader", () => {
  it("reads a composite of at most its type's fields, refuses one of more (as go-amqp: 'invalid field count')", () => {
    fc.assert(
      fc.property(fc.constantFrom(...COMPOSITE_FIELDS.keys()), fc.nat(16), (code, n) => {
        const value = composite(
          code,
          Array.from({ length: n }, () => NULL),
        );
        const read = () => readValue(value, 0);
        if (n <= COMPOSITE_FIELDS.get(code)!.fields) expect(read()[1]).toBe(value.length);
        else expect(read).toThrow(/invalid field count/);
      }),
    );
  });

  it("looks inside: a target in an attach, an error in a detach, a properties section across a transfer's frames", () => {
    const target8 = composite(
      0x29,
      Array.from({ length: 8 }, () => NULL),
    );
    const attach = composite(0x12, [str("l"), uint(0), bool(true), NULL, NULL, composite(0x28, []), target8]);
    const error4 = composite(0x1d, [bytes(0xa3, 1, 0x78), NULL, NULL, NULL]);
    const detach = composite(0x16, [uint(0), bool(true), error4]);
    const properties14 = composite(
      0x73,
      Array.from({ length: 14 }, () => NULL),
    );
    const opened = () => {
      const s = new StrictAmqpStream();
      s.push(Buffer.concat([AMQP_HEADER, frame(composite(0x10, [str("c")]))]));
      return s;
    };
    expect(() => opened().push(frame(attach))).toThrow("invalid field count 8 for 0x29");
    expect(() => opened().push(frame(detach))).toThrow("invalid field count 4 for 0x1d");
    const s = opened();
    const transfer = (more: boolean) =>
      composite(0x14, [uint(0), uint(0), bytes(0xa0, 1, 1), uint(0), bool(true), bool(more)]);
    s.push(frame(Buffer.concat([transfer(true), properties14.subarray(0, 5)])));
    expect(() => s.push(frame(Buffer.concat([transfer(false), properties14.subarray(5)])))).toThrow(
      "invalid field count 14 for 0x73",
    );
  });

  it("refuses what does not add up: a list whose size and elements disagree, an unknown constructor, bytes after a performative", () => {
    const list = composite(0x18, [NULL]);
    list.writeUInt32BE(6, 4); // a size one byte longer than its elements
    expect(() => readValue(Buffer.concat([list, NULL]), 0)).toThrow(StrictAmqpError);
    expect(() => readValue(bytes(0x00, 0x53, 0x18, 0xc0, 2, 1, 0x99), 0)).toThrow(/unknown constructor 0x99/);
    const s = new StrictAmqpStream();
    expect(() =>
      s.push(Buffer.concat([AMQP_HEADER, frame(Buffer.concat([composite(0x10, [str("c")]), NULL]))])),
    ).toThrow(/payload after a performative/);
  });
});

describe("go-amqp's attach bytes (issue 22, item 5)", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;

  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false });
    gw = await startGateway({ nats: nats.url });
  });
  afterAll(async () => {
    await gw?.stop();
    await nats?.stop();
  });

  it("a sender and then a receiver with empty termini (list0, as go-amqp writes them) are answered with termini of at most their fields", async () => {
    const attaches: Value[][] = [];
    const strict = new StrictAmqpStream((code, fields) => {
      if (code === 0x12) attaches.push(fields);
    });
    const problems: string[] = [];
    // Straight to the listener, the test's own strict reader in place of the tap's.
    const socket = tcpConnect(Number(gw.listeners.amqp!.split(":").pop()), "127.0.0.1");
    socket.on("error", () => {});
    socket.on("data", (chunk: Buffer) => {
      try {
        strict.push(chunk);
      } catch (e) {
        problems.push((e as Error).message);
      }
    });
    const begin = composite(0x11, [NULL, uint(0), uint(100), uint(100)]);
    // go-amqp's sender: an empty source, the target's address; a receiver: the reverse.
    const sender = composite(0x12, [
      str("s"),
      uint(0),
      bool(false),
      NULL,
      NULL,
      composite(0x28, []),
      composite(0x29, [str("strict.in")]),
      NULL,
      NULL,
      uint(0),
    ]);
    const receiver = composite(0x12, [
      str("r"),
      uint(1),
      bool(true),
      NULL,
      NULL,
      composite(0x28, [str("strict.out")]),
      composite(0x29, []),
    ]);
    socket.write(
      Buffer.concat([AMQP_HEADER, frame(composite(0x10, [str("go-amqp-like")])), frame(begin), frame(sender)]),
    );
    await eventually(() => expect(attaches).toHaveLength(1));
    socket.write(frame(receiver));
    await eventually(() => expect(attaches).toHaveLength(2));
    socket.destroy();
    expect(problems).toEqual([]);
    const count = (v: Value | undefined) =>
      v?.kind === "described" && v.value.kind === "list" ? v.value.items.length : -1;
    const [toSender, toReceiver] = attaches as [Value[], Value[]];
    // Both attached (a terminus on each side), each terminus within its type.
    expect(count(toSender[5])).toBeGreaterThanOrEqual(0);
    expect(count(toSender[5])).toBeLessThanOrEqual(11);
    expect(count(toReceiver[6])).toBeGreaterThanOrEqual(0);
    expect(count(toReceiver[6])).toBeLessThanOrEqual(7);
  });

  it("every test's clients reach the gateway through the strict tap, which reads what the gateway writes", async () => {
    const before = gw.amqpTap!.frames();
    const c = await AmqpClient.open(gw.port("amqp"));
    await c.receiver({ source: { address: "strict.tapped" } });
    await c.sender({ target: { address: "strict.tapped" } });
    await c.close();
    // open, begin, two attaches, a flow, end and close at least, none refused.
    await eventually(() => (gw.amqpTap!.frames() - before >= 6 ? true : undefined));
    expect(gw.amqpTap!.violations).toEqual([]);
  });
});
