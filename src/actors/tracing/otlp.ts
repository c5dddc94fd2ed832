/**
 * `tracing.otlp`: a span per hop, sent in batches to an OTLP/HTTP endpoint (JSON), through
 * the OpenTelemetry JS SDK. Loaded only when configured (tracing.ts). Nothing is registered
 * globally: the provider is the gateway's own, so an application embedding the gateway
 * keeps its own OpenTelemetry setup. The hops and their parents: docs/decisions/trace-context.md.
 */
import {
  type Attributes,
  type Context,
  createTraceState,
  ROOT_CONTEXT,
  type SpanContext,
  SpanKind,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from "@opentelemetry/semantic-conventions";
import {
  ATTR_MESSAGING_CLIENT_ID,
  ATTR_MESSAGING_DESTINATION_NAME,
  ATTR_MESSAGING_MESSAGE_BODY_SIZE,
  ATTR_MESSAGING_OPERATION,
  ATTR_MESSAGING_OPERATION_NAME,
  ATTR_MESSAGING_OPERATION_TYPE,
  ATTR_MESSAGING_SYSTEM,
  ATTR_SERVICE_INSTANCE_ID,
} from "@opentelemetry/semantic-conventions/incubating";
import type { TracingConfig } from "../../config/tracingSchema.js";
import type { Logger } from "../../log.js";
import {
  formatTraceparent,
  parseTraceparent,
  TRACEPARENT,
  TRACESTATE,
  traceHeader,
  withTraceparentHeader,
} from "../../protocol/traceContext.js";
import type { Hop, Tracing } from "./tracing.js";

/** The gateway's own attributes, namespaced as OpenTelemetry asks of names outside the conventions. */
const ATTR_QOS = "mqgw.qos";
const ATTR_SUBJECT = "mqgw.nats.subject";

/**
 * Batching: spans leave in one request per second or per 512, whichever comes first; past
 * 4096 waiting (a collector away) new ones are dropped by the SDK, never held by the gateway.
 */
const BATCH = { scheduledDelayMillis: 1_000, maxExportBatchSize: 512, maxQueueSize: 4_096 };

export class OtlpTracing implements Tracing {
  private readonly provider: BasicTracerProvider;
  private readonly tracer: Tracer;

  constructor(
    url: string,
    private readonly config: TracingConfig,
    gateway: { readonly id: string; readonly version: string },
    private readonly log: Logger,
  ) {
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({
        [ATTR_SERVICE_NAME]: "mq-gateway",
        [ATTR_SERVICE_VERSION]: gateway.version,
        [ATTR_SERVICE_INSTANCE_ID]: gateway.id,
      }),
      spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url }), BATCH)],
    });
    this.tracer = this.provider.getTracer("mq-gateway", gateway.version);
  }

  /**
   * Two spans: `receive` (from the client; a child of the client's traceparent, or a new
   * trace with `generate`), then `publish` (to NATS) under it, whose context is the
   * traceparent NATS gets. A message without a trace, and no `generate`, gets no span.
   */
  published(hop: Hop, pairs: Array<[string, string]> | undefined): Array<[string, string]> | undefined {
    const parent = remoteParent(pairs);
    if (parent === undefined && !this.config.generate) return pairs;
    const receive = this.tracer.startSpan(
      `receive ${hop.destination}`,
      { kind: SpanKind.CONSUMER, attributes: clientAttributes(hop, "receive", "receive", "receive") },
      parent ?? ROOT_CONTEXT,
    );
    const publish = this.tracer.startSpan(
      `publish ${hop.subject}`,
      {
        kind: SpanKind.PRODUCER,
        attributes: {
          [ATTR_MESSAGING_SYSTEM]: "nats",
          [ATTR_MESSAGING_DESTINATION_NAME]: hop.subject,
          [ATTR_MESSAGING_OPERATION]: "publish",
          [ATTR_MESSAGING_OPERATION_TYPE]: "send",
          [ATTR_MESSAGING_OPERATION_NAME]: "publish",
          [ATTR_MESSAGING_CLIENT_ID]: hop.clientId,
          [ATTR_MESSAGING_MESSAGE_BODY_SIZE]: hop.size,
          [ATTR_QOS]: hop.qos,
        },
      },
      trace.setSpan(ROOT_CONTEXT, receive),
    );
    receive.end();
    publish.end();
    return withTraceparentHeader(pairs, traceparentOf(publish.spanContext()));
  }

  /** One span, `deliver` (to the client), a child of the traceparent the NATS message has; its context is the client's. */
  delivering(hop: Hop, headers: Iterable<readonly [string, string]> | undefined): string | undefined {
    const parent = remoteParent(headers);
    if (parent === undefined) return undefined;
    const deliver = this.tracer.startSpan(
      `deliver ${hop.destination}`,
      { kind: SpanKind.PRODUCER, attributes: clientAttributes(hop, "deliver", "send", "deliver") },
      parent,
    );
    deliver.end();
    return traceparentOf(deliver.spanContext());
  }

  async shutdown(): Promise<void> {
    await this.provider.shutdown().catch((e: Error) => this.log.warn({ err: e.message }, "tracing: spans not sent"));
  }
}

/** The span context a message's trace headers name, as the parent of the next span; undefined without a valid one. */
function remoteParent(headers: Iterable<readonly [string, string]> | undefined): Context | undefined {
  const tp = traceHeader(headers, TRACEPARENT);
  const parsed = tp === undefined ? undefined : parseTraceparent(tp);
  if (parsed === undefined) return undefined;
  const state = traceHeader(headers, TRACESTATE);
  const sc: SpanContext = {
    traceId: parsed.traceId,
    spanId: parsed.spanId,
    traceFlags: parsed.flags & 1,
    isRemote: true,
    ...(state !== undefined ? { traceState: createTraceState(state) } : {}),
  };
  return trace.setSpanContext(ROOT_CONTEXT, sc);
}

function traceparentOf(sc: SpanContext): string {
  return formatTraceparent({ traceId: sc.traceId, spanId: sc.spanId, flags: sc.traceFlags });
}

/**
 * The client-side hops' attributes. `messaging.operation` is the name the conventions had
 * until 1.26 (receive, publish, deliver: the three hops exactly); `.type` and `.name` are
 * today's, so either generation of tools finds them.
 */
function clientAttributes(hop: Hop, operation: string, type: string, name: string): Attributes {
  return {
    [ATTR_MESSAGING_SYSTEM]: hop.protocol,
    [ATTR_MESSAGING_DESTINATION_NAME]: hop.destination,
    [ATTR_MESSAGING_OPERATION]: operation,
    [ATTR_MESSAGING_OPERATION_TYPE]: type,
    [ATTR_MESSAGING_OPERATION_NAME]: name,
    [ATTR_MESSAGING_CLIENT_ID]: hop.clientId,
    [ATTR_MESSAGING_MESSAGE_BODY_SIZE]: hop.size,
    [ATTR_QOS]: hop.qos,
    [ATTR_SUBJECT]: hop.subject,
  };
}
