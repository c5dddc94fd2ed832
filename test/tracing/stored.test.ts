// Issue 26, item 1, on stored subjects: a traced QoS 1 publish into a bound stream reaches
// an MQTT session that was away (read from the stream's consumer) and an unsettled AMQP
// receiver (a JetStream feed) in the publisher's trace, their deliver spans children of
// the publish span.
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient, collect as collectAmqp } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { connectCollecting, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { type OtlpReceiver, startOtlpReceiver } from "../helpers/otlpReceiver.js";
import { eventually } from "../helpers/poll.js";

const TRACE_ID = "5c2a9e1f0b3d4c6e8f7a6b5c4d3e2f10";
const CLIENT_SPAN = "1a2b3c4d5e6f7081";
const session = (clientId: string) => ({
  protocolVersion: 5 as const,
  clientId,
  clean: false,
  properties: { sessionExpiryInterval: 600 },
});
const spanIdOf = (tp: unknown) => /^00-[0-9a-f]{32}-([0-9a-f]{16})-01$/.exec(String(tp))?.[1];

describe("trace context on stored subjects", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let otlp: OtlpReceiver;
  let gw: GatewayHandle;
  let amqp: AmqpClient;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "TRACED", subjects: ["traced.>"] });
    otlp = await startOtlpReceiver();
    gw = await startGateway({
      nats: nats.url,
      config: { bindings: [{ stream: "TRACED" }], tracing: { otlp: otlp.url } },
    });
    amqp = await AmqpClient.open(gw.port("amqp"), { container_id: "stored-trace" });
  });
  afterAll(async () => {
    await amqp?.close();
    await nc?.close();
    await gw?.stop();
    await otlp?.close();
    await nats?.stop();
  });

  it("an MQTT session that was away and an AMQP receiver get the stored message in the publisher's trace", async () => {
    const away = await connectMqtt(gw.port("mqtt"), session("traced-away"));
    await away.subscribeAsync("traced/orders/#", { qos: 1 });
    await away.endAsync();
    const receiver = await amqp.receiver("traced.orders.1");
    const amqpGot = collectAmqp(receiver);

    const pub = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, clientId: "traced-pub" });
    await pub.publishAsync("traced/orders/1", "order", {
      qos: 1,
      properties: { userProperties: { traceparent: `00-${TRACE_ID}-${CLIENT_SPAN}-01` } },
    });
    const { message } = await amqpGot.next();
    const { client: back, inbox } = await connectCollecting(gw.port("mqtt"), {
      ...session("traced-away"),
      resubscribe: false,
    });
    const [stored] = await inbox.count(1);
    const mqttProps = stored!.packet.properties?.userProperties as Record<string, string> | undefined;
    expect(mqttProps?.traceparent).toContain(TRACE_ID);
    expect(String(message.application_properties?.traceparent)).toContain(TRACE_ID);

    const spans = await eventually(() => {
      const s = otlp.spans.filter((x) => x.traceId === TRACE_ID);
      return s.length >= 4 ? s : undefined;
    }, 15_000);
    const receive = spans.find((s) => s.name === "receive traced/orders/1")!;
    const publish = spans.find((s) => s.name === "publish traced.orders.1")!;
    const toMqtt = spans.find((s) => s.name === "deliver traced/orders/1")!;
    const toAmqp = spans.find((s) => s.name === "deliver traced.orders.1")!;
    expect(receive.parentSpanId).toBe(CLIENT_SPAN);
    expect(publish.parentSpanId).toBe(receive.spanId);
    expect([toMqtt.parentSpanId, toAmqp.parentSpanId]).toEqual([publish.spanId, publish.spanId]);
    expect(spanIdOf(mqttProps?.traceparent)).toBe(toMqtt.spanId);
    expect(spanIdOf(message.application_properties?.traceparent)).toBe(toAmqp.spanId);
    expect(toMqtt.attributes).toMatchObject({ "messaging.client.id": "traced-away", "mqgw.qos": 1 });
    receiver.close();
    await Promise.all([pub.endAsync(), back.endAsync()]);
  });
});
