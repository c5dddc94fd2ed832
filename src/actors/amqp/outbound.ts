/**
 * A NATS message -> the encoded AMQP message an AMQP receiver gets
 * (mapping-to-nats.md "Message bodies", "Headers"). A message an AMQP client sent goes
 * back with that client's own sections; any other arrives as one data section, with
 * `to` set to its subject and the Mqgw-* headers as properties. Pure.
 */
import rhea from "rhea";
import { joinMessage, payloadToBody } from "../../protocol/amqpBody.js";
import { isTyped, type TypedValue } from "../../protocol/amqpValue.js";
import { answerableReply, type HeaderEntries, headersToMeta, type MessageMeta } from "../../protocol/headers.js";
import { amqpTypes } from "../../vendor/rhea.js";

const codec = amqpTypes;

const HEADER_SECTION = 0x70;

const asBuffer = (b: Uint8Array): Buffer =>
  Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);

/** The encoded message for `sender.send(bytes, tag, 0)`. */
export function natsToAmqp(
  subject: string,
  headers: HeaderEntries | undefined,
  data: Uint8Array,
  reply: string | undefined,
  /** JetStream redeliveries so far: the header's delivery-count (part 3, 3.2.1). */
  deliveryCount = 0,
  /** How headers become metadata: a receiving link's LastMeta, whose feed hands repeated pairs as one array. */
  readMeta: (headers: HeaderEntries) => MessageMeta = headersToMeta,
): Uint8Array {
  const meta = headers ? readMeta(headers) : {};
  if (meta.amqpHead !== undefined || meta.amqpBody !== undefined || meta.amqpFooter !== undefined) {
    const head = deliveryCount > 0 ? withDeliveryCount(meta.amqpHead, deliveryCount) : meta.amqpHead;
    return joinMessage({ head, body: payloadToBody(data, meta.amqpBody === "sections"), footer: meta.amqpFooter });
  }
  const replyTo = meta.replyTo ?? answerableReply(meta, reply);
  if (replyTo === undefined && deliveryCount === 0 && onlyTo(meta)) return toAndData(subject, data);
  return rhea.message.encode(fromNats(subject, meta, data, reply, deliveryCount) as never);
}

/** Nothing but the subject goes into the message's properties (no reply-to either). */
const onlyTo = (meta: MessageMeta): boolean =>
  meta.correlationId === undefined &&
  meta.contentType === undefined &&
  meta.expiresAt === undefined &&
  meta.amqpMessageId === undefined &&
  meta.amqpSubject === undefined &&
  (meta.userProps === undefined || meta.userProps.length === 0);

/** The properties section of the subject last encoded: the subjects of a link's messages repeat. */
let lastTo: { subject: string; section: Buffer } | undefined;

/**
 * What rhea.message.encode writes for `{ to: subject, body: data_section(data) }`, the
 * message of most NATS deliveries, without its typed wrappers and its 1 KiB Writer per
 * message (issue 16): a properties list [null, null, to] (part 3, 3.2.4) and one data section.
 * test/amqp/pure.test.ts holds it to rhea's encoding.
 */
function toAndData(subject: string, data: Uint8Array): Uint8Array {
  if (lastTo?.subject !== subject) lastTo = { subject, section: propertiesWithTo(subject) };
  const props = lastTo.section;
  const long = data.length > 255;
  const out = Buffer.allocUnsafe(props.length + 3 + (long ? 5 : 2) + data.length);
  props.copy(out, 0);
  let at = props.length;
  out[at++] = 0x00;
  out[at++] = 0x53;
  out[at++] = 0x75; // data
  if (long) {
    out[at] = 0xb0; // vbin32
    out.writeUInt32BE(data.length, at + 1);
    at += 5;
  } else {
    out[at] = 0xa0; // vbin8
    out[at + 1] = data.length;
    at += 2;
  }
  out.set(data, at);
  return out;
}

function propertiesWithTo(subject: string): Buffer {
  const to = Buffer.from(subject, "utf8");
  // message-id and user-id null, then `to` as str8 or str32.
  const str = to.length > 255 ? 5 + to.length : 2 + to.length;
  const items = 2 + str;
  const small = items + 1 <= 255;
  const b = Buffer.allocUnsafe(3 + (small ? 3 : 9) + items);
  b[0] = 0x00;
  b[1] = 0x53;
  b[2] = 0x73; // properties
  let at = 3;
  if (small) {
    b[at] = 0xc0;
    b[at + 1] = items + 1;
    b[at + 2] = 3;
    at += 3;
  } else {
    b[at] = 0xd0;
    b.writeUInt32BE(items + 4, at + 1);
    b.writeUInt32BE(3, at + 5);
    at += 9;
  }
  b[at++] = 0x40;
  b[at++] = 0x40;
  if (to.length > 255) {
    b[at] = 0xb1;
    b.writeUInt32BE(to.length, at + 1);
    at += 5;
  } else {
    b[at] = 0xa1;
    b[at + 1] = to.length;
    at += 2;
  }
  to.copy(b, at);
  return b;
}

const ascii = (s: string) => /^[\x20-\x7e]*$/.test(s);
const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Text stays text (a UUID, "req-42"); other bytes go as binary. */
function correlation(bytes: Uint8Array): unknown {
  try {
    const s = utf8.decode(bytes);
    if (![...s].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f)) return s;
  } catch {
    // Not UTF-8: binary it is.
  }
  return codec.wrap_binary(asBuffer(bytes));
}

function fromNats(
  subject: string,
  meta: MessageMeta,
  data: Uint8Array,
  reply: string | undefined,
  deliveryCount: number,
) {
  const replyTo = meta.replyTo ?? answerableReply(meta, reply);
  const props: Record<string, string> = {};
  // An AMQP receiver gets only the first value of a repeated key (mapping-to-nats.md).
  for (const [k, v] of meta.userProps ?? []) if (!(k in props)) props[k] = v;
  return {
    to: subject,
    ...(deliveryCount > 0 ? { delivery_count: deliveryCount, first_acquirer: false } : {}),
    ...(replyTo !== undefined ? { reply_to: replyTo } : {}),
    ...(meta.correlationId !== undefined ? { correlation_id: correlation(meta.correlationId) } : {}),
    ...(meta.contentType !== undefined && ascii(meta.contentType) ? { content_type: meta.contentType } : {}),
    ...(meta.expiresAt !== undefined ? { absolute_expiry_time: new Date(meta.expiresAt) } : {}),
    ...(meta.amqpMessageId !== undefined ? { message_id: meta.amqpMessageId } : {}),
    ...(meta.amqpSubject !== undefined ? { subject: meta.amqpSubject } : {}),
    ...(Object.keys(props).length > 0 ? { application_properties: props } : {}),
    body: rhea.message.data_section(asBuffer(data)),
  };
}

/**
 * The sender's head with its header section's delivery-count set (and first-acquirer
 * false): the one field an intermediary owns. The other sections keep their bytes.
 */
export function withDeliveryCount(head: Uint8Array | undefined, count: number): Uint8Array {
  const buf = head ? asBuffer(head) : Buffer.alloc(0);
  const rest: Buffer[] = [];
  let old: unknown[] = [];
  const reader = new codec.Reader(buf);
  try {
    while (reader.position < buf.length) {
      const start = reader.position;
      const section = reader.read() as TypedValue;
      const d = section.descriptor;
      if (
        isTyped(d) &&
        (d.value === HEADER_SECTION || d.value === "amqp:header:list") &&
        Array.isArray(section.value)
      ) {
        old = section.value as unknown[];
      } else rest.push(buf.subarray(start, reader.position));
    }
  } catch {
    // joinMessage leaves out a head that does not parse; so does this.
    return head ?? new Uint8Array();
  }
  const keep = (i: number) => old[i] ?? codec.Null();
  const header = codec.described(
    codec.wrap_ulong(HEADER_SECTION),
    codec.wrap_list([keep(0), keep(1), keep(2), codec.wrap_boolean(false), codec.wrap_uint(count)]),
  );
  const w = new codec.Writer();
  w.write(header);
  return Buffer.concat([w.toBuffer(), ...rest]);
}
