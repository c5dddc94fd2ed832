// Issue 26, item 1: one W3C trace across MQTT, NATS and AMQP (docs/decisions/trace-context.md).
// Real gateways, a real nats-server, mqtt.js, rhea and nats.js clients, and an OTLP/HTTP
// receiver in this process for the spans.
import { connect, headers, type Msg, type NatsConnection } from "@nats-io/transport-node";
import type { Message } from "rhea";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient, collect as collectAmqp, rhea, send } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type ConnectedClient, collect as collectMqtt, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "../helpers/otlpReceiver.js";
import { eventually } from "../helpers/poll.js";

let n = 0;
const unique = () => `trace${process.pid}x${++n}`;
const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN = "00f067aa0ba902b7";
const TRACEPARENT = `00-${TRACE_ID}-${CLIENT_SPAN}-01`;
const TRACESTATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";

/** traceparent's fields. */
function parts(tp: unknown): { traceId: string; spanId: string; flags: string } {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(String(tp));
  if (!m) throw new Error(`not a traceparent: ${String(tp)}`);
  return { traceId: m[1]!, spanId: m[2]!, flags: m[3]! };
}

/** The three receivers of one subject: a NATS subscriber, an AMQP receiver and an MQTT 5 subscriber. */
async function receivers(gw: GatewayHandle, nc: NatsConnection, amqp: AmqpClient, subject: string) {
  const natsGot = new Promise<Msg>((resolve) => {
    const sub = nc.subscribe(subject, { max: 1, callback: (_e, m) => resolve(m) });
    void sub;
  });
  await nc.flush();
  const receiver = await amqp.receiver(subject);
  const amqpGot = collectAmqp(receiver);
  const mqttSub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, clientId: `sub-${subject}` });
  const mqttGot = collectMqtt(mqttSub);
  await mqttSub.subscribeAsync(subject.replace(/\./g, "/"), { qos: 1 });
  return {
    async received() {
      const [nats, amqpMsg, mqtt] = await Promise.all([natsGot, amqpGot.next(), mqttGot.count(1)]);
      return {
        nats,
        amqp: amqpMsg.message as Message,
        mqtt: mqtt[0]!.packet.properties?.userProperties as Record<string, string> | undefined,
      };
    },
    async close() {
      receiver.close();
      await mqttSub.endAsync();
    },
  };
}

async function mqttPublisher(gw: GatewayHandle, clientId: string): Promise<ConnectedClient> {
  return connectMqtt(gw.port("mqtt"), { protocolVersion: 5, clientId });
}

describe("trace context", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  beforeAll(async () => {
    nats = await startNatsServer({ jetstream: false });
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  describe("with tracing off: carried unchanged, under the standard names", () => {
    let gw: GatewayHandle;
    let amqp: AmqpClient;
    beforeAll(async () => {
      gw = await startGateway({ nats: nats.url });
      amqp = await AmqpClient.open(gw.port("amqp"), { container_id: "trace-off" });
    });
    afterAll(async () => {
      await amqp?.close();
      await gw?.stop();
    });

    it("an MQTT 5 publisher's traceparent and tracestate reach NATS, AMQP and MQTT receivers byte for byte", async () => {
      const subject = unique();
      const r = await receivers(gw, nc, amqp, subject);
      const pub = await mqttPublisher(gw, "pub-off");
      await pub.publishAsync(subject, "hello", {
        qos: 1,
        properties: { userProperties: { traceparent: TRACEPARENT, tracestate: TRACESTATE, other: "x" } },
      });
      const got = await r.received();
      expect(got.nats.headers?.get("traceparent")).toBe(TRACEPARENT);
      expect(got.nats.headers?.get("tracestate")).toBe(TRACESTATE);
      expect(got.nats.headers?.has("Mqgw-Prop-traceparent")).toBe(false);
      expect(got.nats.headers?.get("Mqgw-Prop-other")).toBe("x");
      expect(got.amqp.application_properties).toEqual({ traceparent: TRACEPARENT, tracestate: TRACESTATE, other: "x" });
      expect(got.mqtt).toEqual({ traceparent: TRACEPARENT, tracestate: TRACESTATE, other: "x" });
      await pub.endAsync();
      await r.close();
    });

    it("a NATS publisher's trace headers reach MQTT and AMQP receivers as their properties", async () => {
      const subject = unique();
      const r = await receivers(gw, nc, amqp, subject);
      const h = headers();
      h.set("traceparent", TRACEPARENT);
      h.set("tracestate", TRACESTATE);
      nc.publish(subject, "from nats", { headers: h });
      const got = await r.received();
      expect(got.amqp.application_properties).toEqual({ traceparent: TRACEPARENT, tracestate: TRACESTATE });
      expect(got.mqtt).toEqual({ traceparent: TRACEPARENT, tracestate: TRACESTATE });
      await r.close();
    });

    it("an AMQP sender's trace fields, as application properties or message annotations, reach NATS and MQTT", async () => {
      for (const place of ["application_properties", "message_annotations"] as const) {
        const subject = unique();
        const r = await receivers(gw, nc, amqp, subject);
        const sender = await amqp.sender(subject);
        const fields = { traceparent: TRACEPARENT, tracestate: TRACESTATE };
        expect(await send(sender, { body: rhea.message.data_section(Buffer.from("a")), [place]: fields })).toEqual({
          state: "accepted",
        });
        const got = await r.received();
        expect(got.nats.headers?.get("traceparent"), place).toBe(TRACEPARENT);
        expect(got.nats.headers?.get("tracestate"), place).toBe(TRACESTATE);
        expect(got.mqtt, place).toEqual(fields);
        // AMQP receivers get the sender's own sections (mapping-to-nats.md), the field where it put it.
        expect((got.amqp as Record<string, unknown>)[place], place).toMatchObject(fields);
        sender.close();
        await r.close();
      }
    });

    it("a publish without a traceparent gets none", async () => {
      const subject = unique();
      const r = await receivers(gw, nc, amqp, subject);
      const pub = await mqttPublisher(gw, "pub-off-none");
      await pub.publishAsync(subject, "plain", { qos: 0 });
      const got = await r.received();
      expect(got.nats.headers?.has("traceparent") ?? false).toBe(false);
      expect(got.amqp.application_properties?.traceparent).toBeUndefined();
      expect(got.mqtt?.traceparent).toBeUndefined();
      await pub.endAsync();
      await r.close();
    });
  });

  describe("with tracing.otlp: a span per hop, one trace", () => {
    let gw: GatewayHandle;
    let amqp: AmqpClient;
    let otlp: OtlpReceiver;
    beforeAll(async () => {
      otlp = await startOtlpReceiver();
      gw = await startGateway({ nats: nats.url, config: { tracing: { otlp: otlp.url } } });
      amqp = await AmqpClient.open(gw.port("amqp"), { container_id: "trace-on" });
    });
    afterAll(async () => {
      await amqp?.close();
      await gw?.stop();
      await otlp?.close();
    });

    const spansOf = (traceId: string, count: number) =>
      eventually(
        () => {
          const found = otlp.spans.filter((s) => s.traceId === traceId);
          return found.length >= count ? found : undefined;
        },
        15_000,
        `${count} spans of trace ${traceId}`,
      );
    const one = (spans: ReceivedSpan[], name: string, system: string) => {
      const found = spans.filter((s) => s.name === name && s.attributes["messaging.system"] === system);
      expect(found, `${name} (${system})`).toHaveLength(1);
      return found[0]!;
    };

    it("an MQTT 5 publish reaches NATS, AMQP and MQTT receivers in the same trace, and the spans chain", async () => {
      const subject = unique();
      const topic = subject.replace(/\./g, "/");
      const r = await receivers(gw, nc, amqp, subject);
      const pub = await mqttPublisher(gw, "pub-on");
      await pub.publishAsync(topic, "hello", {
        qos: 1,
        properties: { userProperties: { traceparent: TRACEPARENT, tracestate: TRACESTATE } },
      });
      const got = await r.received();
      const atNats = parts(got.nats.headers?.get("traceparent"));
      const atAmqp = parts(got.amqp.application_properties?.traceparent);
      const atMqtt = parts(got.mqtt?.traceparent);
      for (const p of [atNats, atAmqp, atMqtt]) expect(p).toMatchObject({ traceId: TRACE_ID, flags: "01" });
      // tracestate is the client's: the gateway adds no entry of its own.
      expect(got.nats.headers?.get("tracestate")).toBe(TRACESTATE);
      expect(got.mqtt?.tracestate).toBe(TRACESTATE);
      expect(got.amqp.application_properties?.tracestate).toBe(TRACESTATE);

      const spans = await spansOf(TRACE_ID, 4);
      expect(spans).toHaveLength(4);
      const receive = one(spans, `receive ${topic}`, "mqtt");
      const publish = one(spans, `publish ${subject}`, "nats");
      const toMqtt = one(spans, `deliver ${topic}`, "mqtt");
      const toAmqp = one(spans, `deliver ${subject}`, "amqp");
      // The chain: client -> receive -> publish -> deliver (each receiver), and each
      // receiver's traceparent names the span that handed it the message.
      expect(receive.parentSpanId).toBe(CLIENT_SPAN);
      expect(publish.parentSpanId).toBe(receive.spanId);
      expect(atNats.spanId).toBe(publish.spanId);
      expect(toMqtt.parentSpanId).toBe(publish.spanId);
      expect(toAmqp.parentSpanId).toBe(publish.spanId);
      expect(atMqtt.spanId).toBe(toMqtt.spanId);
      expect(atAmqp.spanId).toBe(toAmqp.spanId);
      // Messaging semantic conventions.
      expect(receive.attributes).toMatchObject({
        "messaging.system": "mqtt",
        "messaging.destination.name": topic,
        "messaging.operation": "receive",
        "messaging.operation.type": "receive",
        "messaging.client.id": "pub-on",
        "messaging.message.body.size": 5,
        "mqgw.qos": 1,
      });
      expect(receive.kind).toBe(5); // CONSUMER (OTLP numbering: SPAN_KIND_CONSUMER = 5)
      expect(publish.attributes).toMatchObject({
        "messaging.system": "nats",
        "messaging.destination.name": subject,
        "messaging.operation": "publish",
        "messaging.client.id": "pub-on",
      });
      expect(publish.kind).toBe(4); // PRODUCER
      expect(toMqtt.attributes).toMatchObject({
        "messaging.operation": "deliver",
        "messaging.client.id": `sub-${subject}`,
        "mqgw.qos": 1,
        "mqgw.nats.subject": subject,
      });
      expect(toAmqp.attributes).toMatchObject({ "messaging.operation": "deliver", "messaging.client.id": "trace-on" });
      expect(receive.resource).toMatchObject({ "service.name": "mq-gateway", "service.instance.id": gw.id });
      expect(otlp.refused).toEqual([]);
      await pub.endAsync();
      await r.close();
    });

    it("a NATS publisher's traceparent: MQTT and AMQP receivers get its trace, their deliver spans its children", async () => {
      const subject = unique();
      const traceId = "0af7651916cd43dd8448eb211c80319c";
      const natsSpan = "b7ad6b7169203331";
      const r = await receivers(gw, nc, amqp, subject);
      const h = headers();
      h.set("traceparent", `00-${traceId}-${natsSpan}-01`);
      nc.publish(subject, "from nats", { headers: h });
      const got = await r.received();
      const atAmqp = parts(got.amqp.application_properties?.traceparent);
      const atMqtt = parts(got.mqtt?.traceparent);
      expect(atAmqp.traceId).toBe(traceId);
      expect(atMqtt.traceId).toBe(traceId);
      const spans = await spansOf(traceId, 2);
      expect(spans.map((s) => s.parentSpanId)).toEqual([natsSpan, natsSpan]);
      expect(new Set(spans.map((s) => s.spanId))).toEqual(new Set([atAmqp.spanId, atMqtt.spanId]));
      await r.close();
    });

    it("a publish without a traceparent is not traced (tracing.generate is off)", async () => {
      const subject = unique();
      const r = await receivers(gw, nc, amqp, subject);
      const pub = await mqttPublisher(gw, "pub-on-none");
      await pub.publishAsync(subject.replace(/\./g, "/"), "plain", { qos: 0 });
      const got = await r.received();
      expect(got.nats.headers?.has("traceparent") ?? false).toBe(false);
      expect(got.mqtt?.traceparent).toBeUndefined();
      await pub.endAsync();
      await r.close();
    });
  });

  describe("with tracing.generate: a publish without a trace starts one", () => {
    let gw: GatewayHandle;
    let amqp: AmqpClient;
    let otlp: OtlpReceiver;
    beforeAll(async () => {
      otlp = await startOtlpReceiver();
      gw = await startGateway({ nats: nats.url, config: { tracing: { otlp: otlp.url, generate: true } } });
      amqp = await AmqpClient.open(gw.port("amqp"), { container_id: "trace-generate" });
    });
    afterAll(async () => {
      await amqp?.close();
      await gw?.stop();
      await otlp?.close();
    });

    it("an MQTT 3.1.1 publish gets a new trace, rooted at its receive span", async () => {
      const subject = unique();
      const r = await receivers(gw, nc, amqp, subject);
      const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 4, clientId: "pub-311" });
      await pub.publishAsync(subject.replace(/\./g, "/"), "no trace", { qos: 0 });
      const got = await r.received();
      const atNats = parts(got.nats.headers?.get("traceparent"));
      expect(parts(got.mqtt?.traceparent).traceId).toBe(atNats.traceId);
      expect(parts(got.amqp.application_properties?.traceparent).traceId).toBe(atNats.traceId);
      const spans = await eventually(() => {
        const s = otlp.spans.filter((x) => x.traceId === atNats.traceId);
        return s.length >= 4 ? s : undefined;
      }, 15_000);
      const receive = spans.find((s) => s.name.startsWith("receive "))!;
      expect(receive.parentSpanId).toBe("");
      expect(spans.find((s) => s.name.startsWith("publish "))!.spanId).toBe(atNats.spanId);
      await pub.endAsync();
      await r.close();
    });
  });
});
