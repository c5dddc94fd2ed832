// An OTLP/HTTP trace receiver in the test process: POST /v1/traces with the JSON encoding
// (what @opentelemetry/exporter-trace-otlp-http sends), kept as flat spans.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** "" for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  readonly kind: number;
  readonly attributes: Record<string, string | number | boolean>;
  readonly resource: Record<string, string | number | boolean>;
}

export interface OtlpReceiver {
  /** The traces URL, for tracing.otlp. */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** Requests that were not an OTLP JSON trace export. */
  readonly refused: string[];
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number };
type KeyValue = { key: string; value: AnyValue };

function attributes(list: KeyValue[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    if (value.stringValue !== undefined) out[key] = value.stringValue;
    else if (value.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value.boolValue !== undefined) out[key] = value.boolValue;
    else if (value.doubleValue !== undefined) out[key] = value.doubleValue;
  }
  return out;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const refused: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      if (req.method !== "POST" || req.url !== "/v1/traces" || !/json/.test(req.headers["content-type"] ?? "")) {
        refused.push(`${req.method} ${req.url} ${req.headers["content-type"]}`);
        res.writeHead(404).end();
        return;
      }
      const doc = JSON.parse(body) as {
        resourceSpans?: Array<{
          resource?: { attributes?: KeyValue[] };
          scopeSpans?: Array<{ spans?: Array<Record<string, unknown>> }>;
        }>;
      };
      for (const rs of doc.resourceSpans ?? []) {
        const resource = attributes(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? [])
            spans.push({
              traceId: String(s.traceId),
              spanId: String(s.spanId),
              parentSpanId: typeof s.parentSpanId === "string" ? s.parentSpanId : "",
              name: String(s.name),
              kind: Number(s.kind),
              attributes: attributes(s.attributes as KeyValue[] | undefined),
              resource,
            });
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1/traces`,
    spans,
    refused,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
