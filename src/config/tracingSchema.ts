// The `tracing` section (an addition; docs/decisions/trace-context.md): where spans go and
// whether a publish without a trace starts one. Its own file: schema.ts is near its size bound.
import * as z from "zod";

export interface TracingConfig {
  /** The OTLP/HTTP traces URL (`http://collector:4318/v1/traces`); null: no spans, no OpenTelemetry loaded. */
  readonly otlp: string | null;
  /** A client's publish without a `traceparent` is given a new one. */
  readonly generate: boolean;
}

/** An http(s) URL; one without a path gets the OTLP/HTTP traces path, as OTEL_EXPORTER_OTLP_ENDPOINT does. */
function otlpUrl(value: string, ctx: z.RefinementCtx): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    url = new URL("invalid:");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    ctx.addIssue({ code: "custom", message: "is not an http(s) URL (e.g. http://collector:4318)", input: value });
    return z.NEVER;
  }
  if (url.pathname === "/" || url.pathname === "") url.pathname = "/v1/traces";
  return url.toString();
}

export const tracing = z
  .strictObject({
    // "" is off, as for a listener.
    otlp: z
      .string()
      .nullable()
      .default(null)
      .transform((v, ctx) => (v === null || v === "" ? null : otlpUrl(v, ctx))),
    generate: z.boolean().default(false),
  })
  .prefault({});
