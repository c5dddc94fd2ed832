/**
 * W3C Trace Context (`traceparent`, `tracestate`) as the three protocols carry it: an MQTT 5
 * User Property, a NATS header and an AMQP application property, each under the standard
 * name, so a trace crosses the gateway whichever side its tools look at
 * (docs/decisions/trace-context.md). Pure: the random bytes of a new trace come from the caller.
 */

export const TRACEPARENT = "traceparent";
export const TRACESTATE = "tracestate";

/**
 * A User Property or application property that is a trace field. Exactly the lower-case
 * names the W3C formats give: property keys are case-sensitive data, and one spelled
 * otherwise stays an ordinary property (Mqgw-Prop-*), so nothing about it changes.
 */
export function isTraceProperty(key: string): boolean {
  return key === TRACEPARENT || key === TRACESTATE;
}

/** A NATS header that is a trace field, in any case (header names are case-insensitive): its standard name. */
export function traceHeaderName(key: string): string | undefined {
  if (key.length !== 10 && key.length !== 11) return undefined;
  const lower = key.toLowerCase();
  return lower === TRACEPARENT || lower === TRACESTATE ? lower : undefined;
}

/**
 * Whether a value goes into a NATS header byte for byte: printable ASCII without the
 * spaces at either end that NATS clients trim. Valid trace fields always do; anything else
 * under a trace name is carried as an ordinary property instead (percent-encoded), so no
 * byte of it is lost or changed.
 */
export function headerSafe(value: string): boolean {
  const n = value.length;
  if (n === 0 || value.charCodeAt(0) === 0x20 || value.charCodeAt(n - 1) === 0x20) return false;
  for (let i = 0; i < n; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

/** One parsed `traceparent`: lower-case hex ids, flags as a number. */
export interface TraceParent {
  readonly traceId: string;
  readonly spanId: string;
  readonly flags: number;
}

const HEX_ONLY = /^[0-9a-f]+$/;
const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);

/**
 * W3C Trace Context level 1, 3.2: version 00 exactly; a later version by its first four
 * fields (what follows them is that version's to define); version ff and all-zero ids are invalid.
 */
export function parseTraceparent(value: string): TraceParent | undefined {
  const s = value.trim();
  if (s.length < 55) return undefined;
  const version = s.slice(0, 2);
  if (!HEX_ONLY.test(version) || version === "ff") return undefined;
  if (version === "00" ? s.length !== 55 : s.length > 55 && s[55] !== "-") return undefined;
  if (s[2] !== "-" || s[35] !== "-" || s[52] !== "-") return undefined;
  const traceId = s.slice(3, 35);
  const spanId = s.slice(36, 52);
  const flags = s.slice(53, 55);
  if (!HEX_ONLY.test(traceId) || !HEX_ONLY.test(spanId) || !HEX_ONLY.test(flags)) return undefined;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
  return { traceId, spanId, flags: Number.parseInt(flags, 16) };
}

export function formatTraceparent(t: TraceParent): string {
  return `00-${t.traceId}-${t.spanId}-${(t.flags & 0xff).toString(16).padStart(2, "0")}`;
}

const toHex = (bytes: Uint8Array): string =>
  Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");

/**
 * A new sampled trace from 24 random bytes (16 for the trace id, 8 for the span id); an
 * all-zero id, which the format forbids, takes a one in its last byte.
 */
export function newTraceparent(random: Uint8Array): string {
  if (random.byteLength < 24) throw new RangeError("newTraceparent needs 24 random bytes");
  let traceId = toHex(random.subarray(0, 16));
  let spanId = toHex(random.subarray(16, 24));
  if (traceId === ZERO_TRACE) traceId = `${ZERO_TRACE.slice(1)}1`;
  if (spanId === ZERO_SPAN) spanId = `${ZERO_SPAN.slice(1)}1`;
  return formatTraceparent({ traceId, spanId, flags: 1 });
}

/** The first trace field of that name among NATS header pairs (any case), or undefined. */
export function traceHeader(pairs: Iterable<readonly [string, string]> | undefined, name: string): string | undefined {
  if (pairs === undefined) return undefined;
  for (const [k, v] of pairs) if (traceHeaderName(k) === name) return v;
  return undefined;
}

/** The first property of that name among User Properties or application properties, or undefined. */
export function traceProperty(
  props: ReadonlyArray<readonly [string, string]> | undefined,
  name: string,
): string | undefined {
  if (props === undefined) return undefined;
  for (const [k, v] of props) if (k === name) return v;
  return undefined;
}

/**
 * Header pairs with `traceparent` set to `value`: every trace-parent header replaced by
 * one, in the place of the first (or at the end). A new array: header pairs are shared
 * between messages (a client's bare headers, a subscription's last block).
 */
export function withTraceparentHeader(
  pairs: ReadonlyArray<[string, string]> | undefined,
  value: string,
): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  let placed = false;
  for (const pair of pairs ?? []) {
    if (traceHeaderName(pair[0]) !== TRACEPARENT) out.push(pair);
    else if (!placed) {
      out.push([TRACEPARENT, value]);
      placed = true;
    }
  }
  if (!placed) out.push([TRACEPARENT, value]);
  return out;
}

/** As withTraceparentHeader, for User Properties or application properties (the exact name only). */
export function withTraceparentProperty(
  props: ReadonlyArray<[string, string]> | undefined,
  value: string,
): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  let placed = false;
  for (const pair of props ?? []) {
    if (pair[0] !== TRACEPARENT) out.push(pair);
    else if (!placed) {
      out.push([TRACEPARENT, value]);
      placed = true;
    }
  }
  if (!placed) out.push([TRACEPARENT, value]);
  return out;
}
