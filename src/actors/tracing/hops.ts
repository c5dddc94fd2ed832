/**
 * Where the doors meet tracing: each helper is called only when `tracing` is configured
 * (the caller checks the setting first), so a gateway without it pays one undefined check
 * per message. Generic over the doors' own types: neither door is imported here.
 */
import type { HeaderEntries } from "../../protocol/headers.js";
import { withTraceparentHeader, withTraceparentProperty } from "../../protocol/traceContext.js";
import type { Hop, Tracing } from "./tracing.js";

/** A client's message mapped for NATS with its header pairs as this hop leaves them (the same object when unchanged). */
export function tracedPublish<M extends { readonly pairs: Array<[string, string]> | undefined }>(
  tracing: Tracing,
  mapped: M,
  hop: Hop,
): M {
  const pairs = tracing.published(hop, mapped.pairs);
  return pairs === mapped.pairs ? mapped : { ...mapped, pairs };
}

/** As tracedPublish, for the AMQP door's message, whose pairs are its `headers`. */
export function tracedMessage<M extends { readonly headers: Array<[string, string]> | undefined }>(
  tracing: Tracing,
  m: M,
  hop: Hop,
): M {
  const headers = tracing.published(hop, m.headers);
  return headers === m.headers ? m : { ...m, headers };
}

/**
 * A PUBLISH on its way to an MQTT client: the deliver hop's span, and its traceparent in
 * the User Properties (a v5 client's; a 3.1.1 client gets no properties, the span all the same).
 */
export function traceMqttDelivery(
  tracing: Tracing,
  out: { readonly properties?: { userProperties?: Array<[string, string]> } },
  headers: Iterable<readonly [string, string]> | undefined,
  hop: Hop,
): void {
  if (headers === undefined) return;
  const tp = tracing.delivering(hop, headers);
  const props = out.properties;
  if (tp !== undefined && props?.userProperties !== undefined)
    props.userProperties = withTraceparentProperty(props.userProperties, tp);
}

/**
 * A NATS message on its way to an AMQP receiver: the headers it is encoded from, with the
 * deliver hop's traceparent. A message an AMQP client sent goes out in that client's own
 * sections (mapping-to-nats.md), which keep its traceparent as it was.
 */
export function tracedDelivery(
  tracing: Tracing | undefined,
  m: { readonly subject: string; readonly headers: HeaderEntries | undefined; readonly data: Uint8Array },
  clientId: string,
  settleMode: 0 | 1,
): HeaderEntries | undefined {
  if (tracing === undefined || m.headers === undefined) return m.headers;
  const pairs = pairsOf(m.headers);
  const tp = tracing.delivering(
    {
      protocol: "amqp",
      clientId,
      destination: m.subject,
      subject: m.subject,
      qos: settleMode === 1 ? 0 : 1,
      size: m.data.byteLength,
    },
    pairs,
  );
  return tp === undefined ? m.headers : withTraceparentHeader(pairs, tp);
}

function pairsOf(headers: HeaderEntries): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const [k, v] of headers) {
    if (typeof v === "string") out.push([k, v]);
    else for (const x of v) out.push([k, x]);
  }
  return out;
}
