/**
 * The gateway's part in a W3C trace (docs/decisions/trace-context.md): what a hop does to a
 * message's `traceparent`, and, with `tracing.otlp`, the span it exports. This file holds
 * only types and the start: OpenTelemetry is imported (dynamically) by `startTracing` when
 * an OTLP URL is configured, so a gateway without one loads none of it and its message path
 * meets nothing but an `undefined` check.
 */
import { Effect } from "effect";
import type { TracingConfig } from "../../config/tracingSchema.js";
import type { Logger } from "../../log.js";

/** One message at one hop, as the span's messaging attributes describe it. */
export interface Hop {
  /** The protocol of the client at this hop. */
  readonly protocol: "mqtt" | "amqp";
  /** The MQTT client id or the AMQP container-id. */
  readonly clientId: string;
  /** The MQTT topic or AMQP address the client sent to or receives from. */
  readonly destination: string;
  /** The NATS subject the message is on. */
  readonly subject: string;
  readonly qos: 0 | 1 | 2;
  /** Payload bytes. */
  readonly size: number;
}

export interface Tracing {
  /**
   * A client's message, mapped, before it goes to NATS: the header pairs to publish with,
   * carrying this hop's `traceparent` (a new array), or `pairs` itself when the hop leaves
   * the message as it is.
   */
  published(hop: Hop, pairs: Array<[string, string]> | undefined): Array<[string, string]> | undefined;
  /**
   * A NATS message on its way to a client, with the headers it came with: the `traceparent`
   * the client gets instead of the one in them, or undefined to leave it as is.
   */
  delivering(hop: Hop, headers: Iterable<readonly [string, string]> | undefined): string | undefined;
  /** Sends what is still batched; the gateway is stopping. */
  shutdown(): Promise<void>;
}

/**
 * The tracing a config asks for: undefined when it asks for none (the default), a
 * generator of trace ids without spans for `generate` alone, spans sent to `otlp` otherwise.
 */
export async function startTracing(
  config: TracingConfig,
  gateway: { readonly id: string; readonly version: string },
  log: Logger,
): Promise<Tracing | undefined> {
  if (config.otlp !== null) {
    const { OtlpTracing } = await import("./otlp.js");
    log.info({ otlp: config.otlp, generate: config.generate }, "tracing: spans go to the OTLP endpoint");
    return new OtlpTracing(config.otlp, config, gateway, log);
  }
  if (!config.generate) return undefined;
  const { GeneratedTraces } = await import("./generated.js");
  return new GeneratedTraces();
}

/** startTracing for the gateway's scope: what is still batched is sent when the scope closes. */
export function scopedTracing(
  config: TracingConfig,
  gateway: { readonly id: string; readonly version: string },
  log: Logger,
) {
  return Effect.acquireRelease(
    Effect.promise(() => startTracing(config, gateway, log)),
    (tracing) => Effect.promise(async () => tracing?.shutdown()),
  );
}
