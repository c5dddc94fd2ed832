/**
 * Message metadata <-> the Mqgw-* NATS headers of mapping-to-nats.md ("Headers").
 * Both protocols fill one MessageMeta, so a NATS service reads one set of headers
 * whichever protocol published. Choices the spec leaves open: docs/decisions/headers.md.
 * The W3C trace fields are the one exception to Mqgw-Prop-*: a `traceparent` or `tracestate`
 * property is the NATS header of that name (docs/decisions/trace-context.md).
 *
 * No nats.js import: the bridge turns the pairs into MsgHdrs. `headersToMeta` takes any
 * iterable of [key, value | values], which a MsgHdrs already is.
 */

import { headerSafe, isTraceProperty, traceHeaderName } from "./traceContext.js";

export interface MessageMeta {
  /** Absent means 0: the spec's "No header means 0", and it keeps QoS 0 on plain PUB. */
  qos?: 0 | 1 | 2;
  contentType?: string;
  /** MQTT Correlation Data is binary; an AMQP correlation-id arrives as its text or bytes. */
  correlationId?: Uint8Array;
  /** A NATS subject. */
  replyTo?: string;
  /** Unix milliseconds. */
  expiresAt?: number;
  /** In the sender's order; a key may repeat. */
  userProps?: Array<[string, string]>;
  mqttRetain?: boolean;
  mqttClientId?: string;
  mqttPayloadFormat?: 0 | 1;
  amqpMessageId?: string;
  amqpSubject?: string;
  amqpContainerId?: string;
  /** The sender's header, message-annotations, properties and application-properties sections, AMQP-encoded. */
  amqpHead?: Uint8Array;
  /** "sections": the NATS payload is the AMQP encoding of the body sections, not one data section's bytes. */
  amqpBody?: "sections";
  /** The sender's footer section, AMQP-encoded. */
  amqpFooter?: Uint8Array;
  /** Read strictly (headersToMeta): text values whose escapes are not UTF-8, left out. */
  lost?: number;
  /** Read only: the message has a Nats-Msg-Id (with Mqgw-QoS 1/2, it is a stored message's core copy). */
  hasMsgId?: true;
}

export const HEADER = {
  qos: "Mqgw-QoS",
  contentType: "Mqgw-Content-Type",
  correlationId: "Mqgw-Correlation-Id",
  replyTo: "Mqgw-Reply-To",
  expires: "Mqgw-Expires",
  propPrefix: "Mqgw-Prop-",
  mqttRetain: "Mqgw-Mqtt-Retain",
  mqttClientId: "Mqgw-Mqtt-Client-Id",
  mqttPayloadFormat: "Mqgw-Mqtt-Payload-Format",
  mqttPropsOrder: "Mqgw-Mqtt-Props-Order",
  amqpMessageId: "Mqgw-Amqp-Message-Id",
  amqpSubject: "Mqgw-Amqp-Subject",
  amqpContainerId: "Mqgw-Amqp-Container-Id",
  amqpHead: "Mqgw-Amqp-Head",
  amqpBody: "Mqgw-Amqp-Body",
  amqpFooter: "Mqgw-Amqp-Footer",
} as const;

// ---------------------------------------------------------------------------------------
// Percent-encoding. Keys are tokens (printable ASCII, no ':'); values are printable ASCII
// whose leading and trailing spaces every NATS client trims. Anything else, and '%', is
// written as %XX of its UTF-8 bytes, upper-case hex (CONTRACT.md).

const PERCENT = 0x25;
const COLON = 0x3a;
/** Separates Props-Order entries, so keys escape it too. */
const COMMA = 0x2c;
const SPACE = 0x20;
const HEX = "0123456789ABCDEF";

const utf8Encoder = new TextEncoder();
// ignoreBOM: a value that starts with U+FEFF is a value like any other, not a byte-order mark to strip.
const utf8Decoder = new TextDecoder("utf-8", { ignoreBOM: true });

function keyByteIsLiteral(b: number): boolean {
  return b > SPACE && b < 0x7f && b !== COLON && b !== PERCENT && b !== COMMA;
}

function valueByteIsLiteral(b: number, i: number, n: number): boolean {
  if (b === SPACE) return i !== 0 && i !== n - 1;
  return b > SPACE && b < 0x7f && b !== PERCENT;
}

/** Char codes below 0x80 are their own UTF-8 byte, so ASCII strings skip the encoder. */
function asciiLiteral(s: string, literal: (b: number, i: number, n: number) => boolean): boolean {
  const n = s.length;
  for (let i = 0; i < n; i++) if (!literal(s.charCodeAt(i), i, n)) return false;
  return true;
}

function percentEncode(bytes: Uint8Array, literal: (b: number, i: number, n: number) => boolean): string {
  const n = bytes.length;
  let out = "";
  for (let i = 0; i < n; i++) {
    const b = bytes[i]!;
    out += literal(b, i, n) ? String.fromCharCode(b) : `%${HEX[b >> 4]}${HEX[b & 15]}`;
  }
  return out;
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const l = c | 0x20;
  return l >= 0x61 && l <= 0x66 ? l - 0x61 + 10 : -1;
}

/**
 * Lenient on purpose: a NATS service may write raw UTF-8 or a '%' that starts no escape
 * ("100%"); those stay as written. Escapes in either hex case are read.
 */
function percentDecodeBytes(s: string): Uint8Array {
  const raw = utf8Encoder.encode(s);
  if (s.indexOf("%") < 0) return raw;
  const out = new Uint8Array(raw.length);
  let o = 0;
  for (let i = 0; i < raw.length; i++) {
    const b = raw[i]!;
    if (b === PERCENT && i + 2 < raw.length) {
      const hi = hexValue(raw[i + 1]!);
      const lo = hexValue(raw[i + 2]!);
      if (hi >= 0 && lo >= 0) {
        out[o++] = (hi << 4) | lo;
        i += 2;
        continue;
      }
    }
    out[o++] = b;
  }
  return out.subarray(0, o);
}

export function encodeHeaderKey(key: string): string {
  return asciiLiteral(key, keyByteIsLiteral) ? key : percentEncode(utf8Encoder.encode(key), keyByteIsLiteral);
}

export function encodeHeaderValue(value: string): string {
  return asciiLiteral(value, valueByteIsLiteral) ? value : percentEncode(utf8Encoder.encode(value), valueByteIsLiteral);
}

/** Bytes that are not UTF-8 become U+FFFD: a text field cannot hold them anyway. */
export function decodeHeaderKey(key: string): string {
  return key.indexOf("%") < 0 ? key : utf8Decoder.decode(percentDecodeBytes(key));
}

export const decodeHeaderValue = decodeHeaderKey;

const strictDecoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** As decodeHeaderValue, but undefined for escapes that are not UTF-8 (a text field MQTT cannot carry). */
function decodeStrict(s: string): string | undefined {
  if (s.indexOf("%") < 0) return s;
  try {
    return strictDecoder.decode(percentDecodeBytes(s));
  } catch {
    return undefined;
  }
}

/**
 * Binary as a value: printable ASCII bytes stay readable, so a text correlation id
 * ("req-42", a UUID) reads the same in a NATS service as it did in the client.
 */
export function encodeHeaderBytes(bytes: Uint8Array): string {
  return percentEncode(bytes, valueByteIsLiteral);
}

export function decodeHeaderBytes(value: string): Uint8Array {
  return percentDecodeBytes(value);
}

// ---------------------------------------------------------------------------------------
// The header table: one row per single-valued field.

type ScalarField = Exclude<keyof MessageMeta, "userProps">;

interface FieldRow<K extends ScalarField> {
  readonly header: string;
  readonly field: K;
  /** A text field: read strictly, its escapes must be UTF-8. */
  readonly text?: boolean;
  /** undefined: nothing to send (a default, or a value that has no header form). */
  readonly write: (v: NonNullable<MessageMeta[K]>) => string | undefined;
  /** undefined: the header holds no valid value, so the field stays unset. */
  readonly read: (s: string) => MessageMeta[K] | undefined;
}

type AnyRow = { [K in ScalarField]: FieldRow<K> }[ScalarField];

const row = <K extends ScalarField>(
  header: string,
  field: K,
  write: FieldRow<K>["write"],
  read: FieldRow<K>["read"],
): FieldRow<K> => ({ header, field, write, read });

const text = <K extends ScalarField>(header: string, field: K): FieldRow<K> => ({
  ...row(
    header,
    field,
    (v) => encodeHeaderValue(v as string),
    (s) => decodeHeaderValue(s) as MessageMeta[K],
  ),
  text: true,
});

const toBase64 = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("base64");
const fromBase64 = (s: string): Uint8Array => {
  const b = Buffer.from(s, "base64");
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
};

const ROWS: readonly AnyRow[] = [
  row(
    HEADER.qos,
    "qos",
    (q) => (q === 0 ? undefined : String(q)),
    (s) => (s === "0" ? 0 : s === "1" ? 1 : s === "2" ? 2 : undefined),
  ),
  text(HEADER.contentType, "contentType"),
  row(HEADER.correlationId, "correlationId", encodeHeaderBytes, decodeHeaderBytes),
  text(HEADER.replyTo, "replyTo"),
  row(
    HEADER.expires,
    "expiresAt",
    (t) => (Number.isFinite(t) ? String(Math.trunc(t)) : undefined),
    (s) => (/^-?\d{1,16}$/.test(s) ? Number(s) : undefined),
  ),
  row(
    HEADER.mqttRetain,
    "mqttRetain",
    (r) => (r ? "true" : undefined),
    (s) => (s.toLowerCase() === "true" ? true : undefined),
  ),
  text(HEADER.mqttClientId, "mqttClientId"),
  row(
    HEADER.mqttPayloadFormat,
    "mqttPayloadFormat",
    (f) => String(f),
    (s) => (s === "0" ? 0 : s === "1" ? 1 : undefined),
  ),
  text(HEADER.amqpMessageId, "amqpMessageId"),
  text(HEADER.amqpSubject, "amqpSubject"),
  text(HEADER.amqpContainerId, "amqpContainerId"),
  row(HEADER.amqpHead, "amqpHead", toBase64, fromBase64),
  row(
    HEADER.amqpBody,
    "amqpBody",
    (b) => b,
    (s) => (s.toLowerCase() === "sections" ? "sections" : undefined),
  ),
  row(HEADER.amqpFooter, "amqpFooter", toBase64, fromBase64),
];

/**
 * Header names are matched without regard to case: nats.js and nats.go keep a key as
 * written, but HTTP-minded tools canonicalize (`Mqgw-Qos`) and people type `mqgw-qos`.
 */
const ROW_BY_LOWER_NAME = new Map<string, AnyRow>(ROWS.map((r) => [r.header.toLowerCase(), r]));
const PROP_PREFIX_LOWER = HEADER.propPrefix.toLowerCase();
const PROPS_ORDER_LOWER = HEADER.mqttPropsOrder.toLowerCase();
const MQGW_PREFIX_LOWER = "mqgw-";
const MSG_ID_LOWER = "nats-msg-id";
const QOS_LOWER = HEADER.qos.toLowerCase();

/**
 * The NATS reply a receiver may answer: none on the core copy of a stored message
 * (Mqgw-QoS 1/2 with a Nats-Msg-Id), whose NATS reply is the publisher's JetStream ack
 * inbox; a stored message keeps its reply only in Mqgw-Reply-To (mapping-to-nats.md).
 */
export function answerableReply(meta: MessageMeta, reply: string | undefined): string | undefined {
  return reply !== undefined && meta.hasMsgId === true && (meta.qos ?? 0) > 0 ? undefined : reply;
}

/** `answerableReply`'s test on header pairs: Mqgw-QoS 1 or 2 and a Nats-Msg-Id. */
export function isStoredCopy(headers: HeaderEntries): boolean {
  let qos: boolean | undefined;
  let msgId = false;
  for (const [key, vs] of headers) {
    const lower = key.toLowerCase();
    if (lower === MSG_ID_LOWER) msgId = true;
    else if (qos === undefined && lower === QOS_LOWER) {
      // The first value counts, as headersToMeta reads it.
      const v = (typeof vs === "string" ? vs : vs[0])?.trim();
      qos = v === "1" || v === "2";
    }
  }
  return qos === true && msgId;
}

// ---------------------------------------------------------------------------------------

/**
 * Pairs in table order, or undefined when there is nothing to send (so the caller can use
 * plain PUB). `propsOrder`: an MQTT v5 publish, whose User Properties' order is written in
 * Mqgw-Mqtt-Props-Order (AMQP application properties are a map: their order means nothing).
 */
export function metaToHeaders(meta: MessageMeta, propsOrder = false): Array<[string, string]> | undefined {
  const out: Array<[string, string]> = [];
  for (const r of ROWS) {
    const v = meta[r.field];
    if (v === undefined) continue;
    const s = (r.write as (v: unknown) => string | undefined)(v);
    if (s !== undefined) out.push([r.header, s]);
  }
  const props = meta.userProps;
  if (props && props.length > 0) {
    for (const [k, v] of props)
      out.push(
        isTraceProperty(k) && headerSafe(v) ? [k, v] : [HEADER.propPrefix + encodeHeaderKey(k), encodeHeaderValue(v)],
      );
    if (propsOrder && hasSeveralKeys(props))
      out.push([HEADER.mqttPropsOrder, props.map(([k]) => encodeHeaderKey(k)).join(",")]);
  }
  return out.length > 0 ? out : undefined;
}

/**
 * Props-Order is written whenever the properties have two keys or more: a NATS header
 * block's key order is not something every hop keeps (nats.go's Header is a Go map,
 * nats.js MsgHdrs groups a key's values at its first place), so without the list a=1, b=2
 * can come back as b=2, a=1, and a=1, b=2, a=3 always would.
 */
function hasSeveralKeys(props: ReadonlyArray<readonly [string, string]>): boolean {
  const first = props[0]![0];
  for (let i = 1; i < props.length; i++) if (props[i]![0] !== first) return true;
  return false;
}

export type HeaderEntries = Iterable<readonly [string, string | readonly string[]]>;

/**
 * Unknown headers are ignored; of a repeated single-valued header the first value counts.
 * `strict` (for MQTT, whose strings must be UTF-8): a text key or value whose escapes are
 * not UTF-8 is left out and counted in `lost`, rather than read with U+FFFD in it.
 */
export function headersToMeta(headers: HeaderEntries, strict = false): MessageMeta {
  const meta: MessageMeta = {};
  const m = meta as Record<string, unknown>;
  let props: Array<[string, string]> | undefined;
  let order: string | undefined;
  for (const [key, vs] of headers) {
    const values: readonly string[] = typeof vs === "string" ? [vs] : vs;
    if (values.length === 0) continue;
    const lower = key.toLowerCase();
    if (!lower.startsWith(MQGW_PREFIX_LOWER)) {
      if (lower === MSG_ID_LOWER) meta.hasMsgId = true;
      else {
        // Read as written: a trace field is plain ASCII, and a '%' in tracestate is its own.
        const trace = traceHeaderName(key);
        if (trace !== undefined) {
          props ??= [];
          for (const v of values) props.push([trace, v.trim()]);
        }
      }
      continue;
    }
    if (lower.startsWith(PROP_PREFIX_LOWER)) {
      const encodedName = key.slice(PROP_PREFIX_LOWER.length);
      const name = strict ? decodeStrict(encodedName) : decodeHeaderKey(encodedName);
      for (const v of values) {
        const value = name === undefined ? undefined : strict ? decodeStrict(v.trim()) : decodeHeaderValue(v.trim());
        if (name === undefined || value === undefined) meta.lost = (meta.lost ?? 0) + 1;
        else {
          props ??= [];
          props.push([name, value]);
        }
      }
      continue;
    }
    if (lower === PROPS_ORDER_LOWER) {
      order ??= values[0];
      continue;
    }
    const r = ROW_BY_LOWER_NAME.get(lower);
    if (r === undefined || m[r.field] !== undefined) continue;
    const raw = values[0]!.trim();
    const v = strict && r.text ? decodeStrict(raw) : r.read(raw);
    if (v !== undefined) m[r.field] = v;
    else if (strict && r.text) meta.lost = (meta.lost ?? 0) + 1;
  }
  if (props) meta.userProps = order === undefined ? props : applyOrder(props, order);
  return meta;
}

/**
 * Props-Order lists the key of every property in sequence. Each entry takes the next
 * unused value of its key; entries without one are skipped and values no entry took
 * follow in header order, so a stale or hand-written list never loses a property.
 */
function applyOrder(props: Array<[string, string]>, order: string): Array<[string, string]> {
  const queues = new Map<string, string[]>();
  for (const [k, v] of props) {
    const q = queues.get(k);
    if (q) q.push(v);
    else queues.set(k, [v]);
  }
  const out: Array<[string, string]> = [];
  for (const entry of order.split(",")) {
    const k = decodeHeaderKey(entry.trim());
    const v = queues.get(k)?.shift();
    if (v !== undefined) out.push([k, v]);
  }
  for (const [k, q] of queues) for (const v of q) out.push([k, v]);
  return out;
}

/**
 * `headersToMeta` remembering its last answer: a subscription's header reader hands the
 * same pairs array for every message with the same block (actors/client/headerPairs.ts), so a
 * receiver of one publisher reads its metadata once (issue 16). Keyed by identity: the
 * pairs are never changed, and the metadata is only read (natsToMqttPublish copies what
 * it hands on).
 */
export class LastMeta {
  private pairs: Iterable<[string, string]> | undefined;
  private strictness = -1;
  private meta: MessageMeta = {};

  readonly read = (headers: Iterable<[string, string]>, strict: boolean): MessageMeta => {
    const s = strict ? 1 : 0;
    if (headers === this.pairs && s === this.strictness) return this.meta;
    this.meta = headersToMeta(headers, strict);
    this.pairs = headers;
    this.strictness = s;
    return this.meta;
  };
}
