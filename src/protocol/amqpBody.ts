/**
 * AMQP message sections <-> NATS payload and the Mqgw-Amqp-Head/Body/Footer headers
 * (mapping-to-nats.md, "Message bodies"). One data section is the payload byte for
 * byte; any other body travels in its AMQP encoding with Mqgw-Amqp-Body: sections.
 *
 * Everything works on the sender's encoded bytes, split at section boundaries with
 * rhea's Reader: re-encoding rhea's decoded message would turn a symbol into a string,
 * a ubyte into a uint and a uuid into binary, and AMQP receivers are promised the
 * sender's sections unchanged. Choices: docs/decisions/headers.md.
 */
import rhea from "rhea";
import { applicationPropertiesToText, isTyped, type TypedValue } from "./amqpValue.js";
import { err, ok, type Result } from "./result.js";
import { isTraceProperty } from "./traceContext.js";

/** The part of rhea's codec used here; its typings leave Reader and Writer out. */
interface RheaCodec {
  Reader: new (b: Buffer) => { position: number; read(): TypedValue };
  Writer: new (b?: Buffer) => { write(o: unknown): void; toBuffer(): Buffer };
  wrap_ulong(n: number): unknown;
  wrap_binary(b: Buffer): unknown;
  wrap(o: unknown): unknown;
  described(descriptor: unknown, o: unknown): unknown;
}
const codec = rhea.types as unknown as RheaCodec;

/** AMQP 1.0 part 3, 3.2: section descriptors. */
export const Section = {
  header: 0x70,
  deliveryAnnotations: 0x71,
  messageAnnotations: 0x72,
  properties: 0x73,
  applicationProperties: 0x74,
  data: 0x75,
  amqpSequence: 0x76,
  amqpValue: 0x77,
  footer: 0x78,
} as const;

const BY_SYMBOL: ReadonlyMap<string, number> = new Map([
  ["amqp:header:list", Section.header],
  ["amqp:delivery-annotations:map", Section.deliveryAnnotations],
  ["amqp:message-annotations:map", Section.messageAnnotations],
  ["amqp:properties:list", Section.properties],
  ["amqp:application-properties:map", Section.applicationProperties],
  ["amqp:data:binary", Section.data],
  ["amqp:amqp-sequence:list", Section.amqpSequence],
  ["amqp:amqp-value:*", Section.amqpValue],
  ["amqp:value:*", Section.amqpValue], // as rhea spells it
  ["amqp:footer:map", Section.footer],
]);

const LIST_CODES: ReadonlySet<number> = new Set([0x45, 0xc0, 0xd0]);
const MAP_CODES: ReadonlySet<number> = new Set([0xc1, 0xd1]);
const BINARY_CODES: ReadonlySet<number> = new Set([0xa0, 0xb0]);
const NULL_CODE = 0x40;

type Part = "head" | "hop" | "body" | "footer";

/** What each section is and the encoding its value must have. */
const SECTIONS: ReadonlyMap<number, { part: Part; codes: ReadonlySet<number> | undefined }> = new Map([
  [Section.header, { part: "head", codes: LIST_CODES }],
  // Delivery annotations are for the next hop only (part 3, 3.2.2), so they do not travel.
  [Section.deliveryAnnotations, { part: "hop", codes: MAP_CODES }],
  [Section.messageAnnotations, { part: "head", codes: MAP_CODES }],
  [Section.properties, { part: "head", codes: LIST_CODES }],
  [Section.applicationProperties, { part: "head", codes: MAP_CODES }],
  [Section.data, { part: "body", codes: BINARY_CODES }],
  [Section.amqpSequence, { part: "body", codes: LIST_CODES }],
  [Section.amqpValue, { part: "body", codes: undefined }],
  [Section.footer, { part: "footer", codes: MAP_CODES }],
]);

interface ParsedSection {
  readonly code: number;
  readonly part: Part;
  readonly start: number;
  readonly end: number;
  readonly value: TypedValue;
}

const asBuffer = (b: Uint8Array): Buffer =>
  Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
const view = (b: Uint8Array): Uint8Array => new Uint8Array(b.buffer, b.byteOffset, b.byteLength);

function sectionCode(descriptor: unknown): number | undefined {
  if (!isTyped(descriptor)) return undefined;
  const d = descriptor.value;
  return typeof d === "number" ? d : typeof d === "string" ? BY_SYMBOL.get(d) : undefined;
}

function parseSections(bytes: Uint8Array): Result<ParsedSection[], string> {
  const buf = asBuffer(bytes);
  const reader = new codec.Reader(buf);
  const out: ParsedSection[] = [];
  try {
    while (reader.position < buf.length) {
      const start = reader.position;
      const value = reader.read();
      // rhea's Reader slices past the end of a truncated value instead of throwing.
      if (reader.position > buf.length) return err(`section at byte ${start} is truncated`);
      const code = sectionCode(value.descriptor);
      const kind = code === undefined ? undefined : SECTIONS.get(code);
      if (code === undefined || kind === undefined) return err(`byte ${start} does not start a message section`);
      if (kind.codes && !kind.codes.has(value.type.typecode)) {
        return err(`section 0x${code.toString(16)} at byte ${start} has the wrong type`);
      }
      out.push({ code, part: kind.part, start, end: reader.position, value });
    }
  } catch (e) {
    return err(`not an AMQP message: ${e instanceof Error ? e.message : String(e)}`);
  }
  return ok(out);
}

/** A header or properties list of nulls, or an empty map, says nothing; rhea sends such sections always. */
function isEmptySection(s: ParsedSection): boolean {
  const items = s.value.value;
  if (!Array.isArray(items)) return false;
  return items.every((i: unknown) => isTyped(i) && i.type.typecode === NULL_CODE);
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function slices(bytes: Uint8Array, sections: readonly ParsedSection[]): Uint8Array | undefined {
  if (sections.length === 0) return undefined;
  return concat(sections.map((s) => bytes.subarray(s.start, s.end)));
}

/** An AMQP message cut at section boundaries; each part is still in the sender's encoding. */
export interface MessageSections {
  /** header, message-annotations, properties, application-properties (those that say anything). */
  readonly head?: Uint8Array | undefined;
  /** The body sections: data, amqp-sequence or amqp-value. */
  readonly body: Uint8Array;
  readonly footer?: Uint8Array | undefined;
}

/**
 * The payload of a message that is one data section, after an empty header and
 * properties section (list0) or none: what rhea writes for `{ body: data_section(b) }`,
 * and most senders' messages. Read from the bytes without the Reader (issue 16); undefined
 * for any other message, which splitMessage and bodyToPayload take as before.
 */
export function plainDataPayload(encoded: Uint8Array): Uint8Array | undefined {
  const b = encoded;
  let at = 0;
  // 00 53 70 45: an empty header; 00 53 73 45: empty properties (in that order, as a message has them).
  if (b.length >= at + 4 && b[at] === 0x00 && b[at + 1] === 0x53 && b[at + 2] === Section.header && b[at + 3] === 0x45)
    at += 4;
  if (
    b.length >= at + 4 &&
    b[at] === 0x00 &&
    b[at + 1] === 0x53 &&
    b[at + 2] === Section.properties &&
    b[at + 3] === 0x45
  )
    at += 4;
  if (b.length < at + 5 || b[at] !== 0x00 || b[at + 1] !== 0x53 || b[at + 2] !== Section.data) return undefined;
  at += 3;
  let size: number;
  if (b[at] === 0xa0) {
    size = b[at + 1]!;
    at += 2;
  } else if (b[at] === 0xb0 && b.length >= at + 5) {
    size = ((b[at + 1]! << 24) >>> 0) + (b[at + 2]! << 16) + (b[at + 3]! << 8) + b[at + 4]!;
    at += 5;
  } else return undefined;
  // The data section ends the message: a footer or a second section is for splitMessage.
  return at + size === b.length ? view(b).subarray(at) : undefined;
}

/** An encoded message (a transfer's payload) -> its parts. Delivery annotations are dropped. */
export function splitMessage(encoded: Uint8Array): Result<MessageSections, string> {
  const parsed = parseSections(encoded);
  if (!parsed.ok) return parsed;
  const bytes = view(encoded);
  const all = parsed.value;
  const head = slices(
    bytes,
    all.filter((s) => s.part === "head" && !isEmptySection(s)),
  );
  const body = slices(
    bytes,
    all.filter((s) => s.part === "body"),
  );
  const footer = slices(
    bytes,
    all.filter((s) => s.part === "footer" && !isEmptySection(s)),
  );
  return ok({ head, body: body ?? new Uint8Array(), footer });
}

/**
 * Parts -> an encoded message for `sender.send(bytes, tag, 0)`. A head or footer that
 * does not parse as such sections (headers are only as trustworthy as the publisher)
 * is left out rather than sent to break the receiver's decoder.
 */
export function joinMessage(parts: MessageSections): Uint8Array {
  const out: Uint8Array[] = [];
  if (parts.head && only(parts.head, "head")) out.push(parts.head);
  out.push(parts.body);
  if (parts.footer && only(parts.footer, "footer")) out.push(parts.footer);
  return concat(out);
}

function only(bytes: Uint8Array, part: Part): boolean {
  const parsed = parseSections(bytes);
  return parsed.ok && parsed.value.every((s) => s.part === part);
}

export interface BodyPayload {
  readonly payload: Uint8Array;
  /** true: the payload is the AMQP encoding of the body sections (Mqgw-Amqp-Body: sections). */
  readonly sections: boolean;
}

/** Encoded body sections -> NATS payload: exactly one data section is its bytes, anything else stays encoded. */
export function bodyToPayload(body: Uint8Array): Result<BodyPayload, string> {
  const parsed = parseSections(body);
  if (!parsed.ok) return parsed;
  const sections = parsed.value;
  if (sections.some((s) => s.part !== "body")) return err("not only body sections");
  const first = sections[0];
  if (sections.length === 1 && first!.code === Section.data) {
    return ok({ payload: view(first!.value.value as Uint8Array), sections: false });
  }
  // A body must have a section (part 3, 3.2); an empty one reads as an empty payload and goes back as one empty data section.
  if (sections.length === 0) return ok({ payload: new Uint8Array(), sections: false });
  return ok({ payload: view(body), sections: true });
}

/**
 * NATS payload -> encoded body sections. A payload marked as sections that is not
 * body sections (a NATS client can set the header on anything) goes as one data
 * section instead, so the receiver still gets the bytes.
 */
export function payloadToBody(payload: Uint8Array, sections: boolean): Uint8Array {
  if (sections) {
    const parsed = parseSections(payload);
    if (parsed.ok && isBody(parsed.value)) return payload;
  }
  return encode([codec.described(codec.wrap_ulong(Section.data), codec.wrap_binary(asBuffer(payload)))]);
}

function isBody(sections: readonly ParsedSection[]): boolean {
  return sections.length > 0 && sections.every((s) => s.part === "body");
}

function encode(sections: readonly unknown[]): Uint8Array {
  const w = new codec.Writer();
  for (const s of sections) w.write(s);
  return view(w.toBuffer());
}

/**
 * For a message that rhea has already decoded: `msg.body` -> encoded body sections, the
 * way rhea's own encoder writes a body. Types inside an amqp-value may differ from the
 * sender's (see the top of this file); prefer splitMessage on the transfer's bytes.
 */
export function rheaBodyToSections(body: unknown): Uint8Array {
  const sections: unknown[] = [];
  const collect = (body as { collect_sections?: unknown } | null | undefined)?.collect_sections;
  if (typeof collect === "function") collect.call(body, sections);
  else sections.push(codec.described(codec.wrap_ulong(Section.amqpValue), codec.wrap(body)));
  return encode(sections);
}

/** The application properties in a head, as text (amqpValue.ts), in the sender's order. */
export function headApplicationProperties(head: Uint8Array): Array<[string, string]> {
  const parsed = parseSections(head);
  if (!parsed.ok) return [];
  const s = parsed.value.find((x) => x.code === Section.applicationProperties);
  return s ? applicationPropertiesToText(s.value) : [];
}

/**
 * The application properties of a head with the trace fields its message-annotations
 * hold and its application properties do not (the W3C AMQP draft puts them there), so
 * they reach NATS and MQTT under their standard names (docs/decisions/trace-context.md).
 */
export function headPropertiesWithTrace(head: Uint8Array): Array<[string, string]> {
  const props = headApplicationProperties(head);
  const annotations = headSection(head, Section.messageAnnotations);
  if (annotations === undefined) return props;
  for (const [k, v] of applicationPropertiesToText(annotations))
    if (isTraceProperty(k) && !props.some(([p]) => p === k)) props.push([k, v]);
  return props;
}

/** A head section's value as rhea's Reader returns it, for the bridge to read properties or header fields. */
export function headSection(head: Uint8Array, code: number): TypedValue | undefined {
  const parsed = parseSections(head);
  return parsed.ok ? parsed.value.find((x) => x.code === code)?.value : undefined;
}
