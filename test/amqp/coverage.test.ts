// Issue 4: behaviours the audit (docs/decisions/amqp-coverage.md) found without an end to
// end test: the sender's sections byte for byte through a NATS service, absolute-expiry
// and application properties as text on the NATS side, modified(undeliverable-here),
// operator queues on the wrong stream, wildcard sources that mix stored and unstored
// subjects, and multi-frame messages at the configured maximum, both ways.
import { AckPolicy, type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { Source } from "rhea";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HEADER_ROOM } from "../../src/protocol/natsLimits.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { nextMsg } from "../helpers/natsMessages.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { AmqpClient, bodyText, collect, rhea, send } from "./rheaClient.js";

const MAX_FRAME = 4096;
const MAX_PAYLOAD = 65_536;
const DYNAMIC = { dynamic: true } as unknown as Source;
let n = 0;
const unique = (prefix: string) => `${prefix}.${process.pid}x${++n}`;

/** The encoded bytes of each message the test process's rhea receives, as they came off the wire. */
function captureIncoming(): { raws: Buffer[]; stop: () => void } {
  const codec = rhea.message as unknown as { decode(b: Buffer): unknown };
  const original = codec.decode;
  const raws: Buffer[] = [];
  codec.decode = (b: Buffer) => {
    raws.push(Buffer.from(b));
    return original(b);
  };
  return {
    raws,
    stop: () => {
      codec.decode = original;
    },
  };
}

describe("issue 4 coverage gaps, end to end", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let amqp: AmqpClient;

  beforeAll(async () => {
    nats = await startNatsServer({ config: `max_payload: ${MAX_PAYLOAD}` });
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "COV", subjects: ["cov.stored.>"] });
    await jsm.streams.add({ name: "COVB", subjects: ["cov.other.>"] });
    gw = await startGateway({
      nats: nats.url,
      config: {
        amqp: { listen: "127.0.0.1:0", max_frame_size: MAX_FRAME },
        bindings: [{ stream: "COV" }, { stream: "COVB" }],
      },
    });
    amqp = await AmqpClient.open(gw.port("amqp"), { container_id: "coverage-test" });
  });
  afterAll(async () => {
    await amqp?.close();
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  describe("messages (item 5)", () => {
    const uuid = Buffer.from("0123456789abcdef0123456789abcdef", "hex");
    const expiry = 4_102_444_800_000;
    const when = 1_700_000_000_000;
    const message = () => ({
      durable: true,
      priority: 7,
      message_annotations: { "x-opt-a": "b" },
      message_id: "m-9",
      subject: "JMSType",
      reply_to: "r.s",
      correlation_id: "corr-x",
      content_type: "application/octet-stream",
      absolute_expiry_time: new Date(expiry),
      application_properties: {
        n: 1.5,
        flag: false,
        when: new Date(when),
        id: rhea.types.wrap_uuid(uuid),
        bin: Buffer.from([1, 2, 3]),
      },
      body: { k: [1, "two"] },
      footer: { "x-f": "foot" },
    });

    it("a NATS subscriber sees absolute-expiry and the application properties as text in Mqgw-* headers", async () => {
      const subject = unique("cov.text");
      const got = nextMsg(nc, subject);
      await nc.flush();
      const sender = await amqp.sender(subject);
      expect(await send(sender, message() as never)).toEqual({ state: "accepted" });
      const h = (await got).headers!;
      expect(h.get("Mqgw-Expires")).toBe(String(expiry));
      expect(h.get("Mqgw-Prop-n")).toBe("1.5");
      expect(h.get("Mqgw-Prop-flag")).toBe("false");
      expect(h.get("Mqgw-Prop-when")).toBe(String(when));
      expect(h.get("Mqgw-Prop-id")).toBe("01234567-89ab-cdef-0123-456789abcdef");
      expect(h.get("Mqgw-Prop-bin")).toBe(Buffer.from([1, 2, 3]).toString("base64"));
      expect(h.get("Mqgw-Content-Type")).toBe("application/octet-stream");
      expect(h.get("Mqgw-Correlation-Id")).toBe("corr-x");
      expect(h.get("Mqgw-Reply-To")).toBe("r.s");
      expect(h.get("Mqgw-Amqp-Message-Id")).toBe("m-9");
      expect(h.get("Mqgw-Amqp-Subject")).toBe("JMSType");
      expect(h.get("Mqgw-Amqp-Body")).toBe("sections");
      expect(h.get("Mqgw-Amqp-Head")).not.toBe("");
      expect(h.get("Mqgw-Amqp-Footer")).not.toBe("");
      sender.close();
    });

    it("the sender's sections (Mqgw-Amqp-Head/Body/Footer) reach an AMQP receiver byte for byte, through a NATS service that forwards them", async () => {
      const into = unique("cov.into");
      const out = unique("cov.out");
      // A NATS service between the two: it forwards payload and headers as they are.
      const service = nc.subscribe(into, {
        max: 1,
        callback: (_e, m) => nc.publish(out, m.data, { headers: m.headers! }),
      });
      const receiver = await amqp.receiver(out);
      const got = collect(receiver);
      await nc.flush();
      // rhea writes the footer before the body; part 3, 3.2 puts it last, so send it there.
      const encoded = rhea.message.encode(message() as never) as unknown as Buffer;
      const footer = encoded.indexOf(Buffer.from([0x00, 0x53, 0x78]));
      const body = encoded.indexOf(Buffer.from([0x00, 0x53, 0x77]), footer);
      expect(footer).toBeGreaterThan(0);
      const bytes = Buffer.concat([
        encoded.subarray(0, footer),
        encoded.subarray(body),
        encoded.subarray(footer, body),
      ]);
      const capture = captureIncoming();
      try {
        expect(await send(await amqp.sender(into), bytes, 0)).toEqual({ state: "accepted" });
        const { message: m } = await got.next();
        expect(m.footer).toEqual({ "x-f": "foot" });
        expect(capture.raws.length).toBe(1);
        expect(capture.raws[0]!.toString("hex")).toBe(bytes.toString("hex"));
      } finally {
        capture.stop();
        service.unsubscribe();
        receiver.close();
      }
    });

    it("request/reply from a dynamic source with a NATS service: the reply carries the request's correlation-id", async () => {
      const service = unique("cov.svc");
      nc.subscribe(service, { max: 1, callback: (_e, m) => m.respond(`re:${m.string()}`, { headers: m.headers }) });
      await nc.flush();
      const replies = await amqp.receiver({ source: DYNAMIC });
      const inbox = (replies.source as { address: string }).address;
      const got = collect(replies);
      await send(await amqp.sender(service), {
        body: rhea.message.data_section(Buffer.from("q")),
        reply_to: inbox,
        correlation_id: "c-77",
      });
      const { message: m } = await got.next();
      expect(bodyText(m)).toBe("re:q");
      // The reply carries the request's own sections back (the service kept its headers).
      expect(m.correlation_id).toBe("c-77");
      replies.close();
    });
  });

  describe("addresses (item 2)", () => {
    it("the anonymous relay refuses per message what a target refuses: empty tokens, whitespace, DEL (invalid-field)", async () => {
      const relay = await amqp.sender({ target: {} });
      for (const to of ["r..x", "r x", "r.\x7f", ".r", "r.\t"]) {
        expect(await send(relay, { to, body: "bad" })).toMatchObject({
          state: "rejected",
          error: { condition: "amqp:invalid-field" },
        });
        // The same address as a target is refused at attach.
        expect(await amqp.refused("sender", to)).toMatchObject({ condition: "amqp:invalid-field" });
      }
      // The relay goes on after its refusals.
      const subject = unique("cov.relay");
      const got = nextMsg(nc, subject);
      await nc.flush();
      expect(await send(relay, { to: subject, body: rhea.message.data_section(Buffer.from("ok")) })).toEqual({
        state: "accepted",
      });
      expect((await got).string()).toBe("ok");
      relay.close();
    });
  });

  describe("dispositions and stored sources (items 3 and 4)", () => {
    it("modified(undeliverable-here) on an operator queue: never again to this link, kept for the queue's other receivers", async () => {
      await jsm.consumers.add("COV", {
        durable_name: "undeliverable",
        ack_policy: AckPolicy.Explicit,
        filter_subject: "cov.stored.u",
      });
      nc.publish("cov.stored.u", "not here");
      nc.publish("cov.stored.u", "after");
      await nc.flush();
      const r = await amqp.receiver({ source: "cov.stored.u::undeliverable", credit_window: 0, autoaccept: false });
      const got = collect(r);
      r.add_credit(1);
      const first = await got.next();
      expect(bodyText(first.message)).toBe("not here");
      first.delivery.modified({ undeliverable_here: true, delivery_failed: true });
      r.add_credit(5);
      const second = await got.next();
      expect(bodyText(second.message)).toBe("after");
      second.delivery.accept();
      // JetStream offers it again (a NAK with a delay), but not to this link.
      expect(await got.none(1_500)).toBe(true);
      const other = await amqp.receiver("cov.stored.u::undeliverable");
      const again = await collect(other).next();
      expect(bodyText(again.message)).toBe("not here");
      expect(again.message.delivery_count).toBeGreaterThanOrEqual(1);
      await eventually(
        async () => {
          const info = await jsm.consumers.info("COV", "undeliverable");
          return info.num_ack_pending === 0 && info.num_pending === 0 ? info : undefined;
        },
        5_000,
        "both settled",
      );
      r.close();
      other.close();
    });

    it("an operator queue on another stream than the one storing the address is refused amqp:not-found", async () => {
      await jsm.consumers.add("COVB", {
        durable_name: "on-b",
        ack_policy: AckPolicy.Explicit,
        filter_subject: "cov.other.x",
      });
      expect(await amqp.refused("receiver", "cov.stored.x::on-b")).toMatchObject({ condition: "amqp:not-found" });
      // An address spanning both streams has no one stream for a queue.
      expect(await amqp.refused("receiver", "cov.*.x::on-b")).toMatchObject({
        condition: "amqp:precondition-failed",
      });
    });

    it("an unsettled wildcard source mixing stored and unstored subjects is refused amqp:not-implemented; presettled is served", async () => {
      // *.stored.mix covers cov.stored.mix (COV) and, say, plain.stored.mix (no stream).
      expect(await amqp.refused("receiver", { source: { address: "*.stored.mix" }, snd_settle_mode: 0 })).toMatchObject(
        { condition: "amqp:not-implemented" },
      );
      const r = await amqp.receiver({ source: { address: "*.stored.mix" }, snd_settle_mode: 1 });
      const got = collect(r);
      await nc.flush();
      nc.publish("plain.stored.mix", "unstored one");
      expect(bodyText((await got.next()).message)).toBe("unstored one");
      r.close();
    });
  });

  describe("multi-frame transfers at the configured maximum (item 4)", () => {
    it("client -> gateway: a message of the largest size advertised crosses in frames of max-frame-size", async () => {
      const subject = unique("cov.big.in");
      const sender = await amqp.sender({ target: { address: subject }, snd_settle_mode: 1 });
      // What NATS takes less room for the gateway's headers (src/protocol/natsLimits.ts).
      expect((sender as unknown as { max_message_size: number }).max_message_size).toBe(MAX_PAYLOAD - HEADER_ROOM);
      // The largest data section the link allows: rhea's encoding of the message around it makes the limit.
      const overhead = rhea.message.encode({ body: rhea.message.data_section(Buffer.alloc(1000)) }).length - 1000;
      const body = Buffer.alloc(MAX_PAYLOAD - HEADER_ROOM - overhead, 3);
      const got = nextMsg(nc, subject);
      await nc.flush();
      sender.send({ body: rhea.message.data_section(body) });
      const m = await got;
      expect(Buffer.compare(Buffer.from(m.data), body)).toBe(0);
      sender.close();
    });

    it("gateway -> client: a NATS message of max_payload bytes reaches a receiver whose max-frame-size is 512, in frames", async () => {
      const c = await AmqpClient.open(gw.port("amqp"), { max_frame_size: 512 });
      const subject = unique("cov.big.out");
      const got = collect(await c.receiver(subject));
      await nc.flush();
      const body = Buffer.alloc(MAX_PAYLOAD, 9);
      nc.publish(subject, body);
      const { message } = await got.next();
      expect(Buffer.compare((message.body as { content: Buffer }).content, body)).toBe(0);
      await c.close();
    });
  });

  it("logged no errors along the way", () => {
    expect(gw.logs.filter((l) => Number(l.level) >= 50)).toEqual([]);
  });
});
