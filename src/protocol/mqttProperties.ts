/**
 * MQTT 5 property blocks (section 2.2.2) read and written in wire order. mqtt-packet keeps
 * User Properties in an object, which groups repeated keys (a=1, b=2, a=3 becomes
 * {a: [1, 3], b: 2}) and puts integer-like keys first: the order a publisher chose is gone
 * before the gateway sees it. Here they are a list of pairs, as on the wire
 * (docs/decisions/user-property-order.md).
 */

/** The PUBLISH properties the gateway reads and writes. */
export interface PublishProperties {
  payloadFormatIndicator?: boolean | number;
  messageExpiryInterval?: number;
  topicAlias?: number;
  responseTopic?: string;
  correlationData?: Uint8Array;
  /** In wire order; a key may repeat. */
  userProperties?: Array<[string, string]>;
  subscriptionIdentifier?: number | number[];
  contentType?: string;
}

/** How each property's value is encoded (MQTT 5 section 2.2.2.2, the property table as data). */
enum Kind {
  Byte,
  TwoBytes,
  FourBytes,
  VarInt,
  Text,
  Binary,
  Pair,
}

const KIND: ReadonlyMap<number, Kind> = new Map([
  [0x01, Kind.Byte], // payload format indicator
  [0x02, Kind.FourBytes], // message expiry interval
  [0x03, Kind.Text], // content type
  [0x08, Kind.Text], // response topic
  [0x09, Kind.Binary], // correlation data
  [0x0b, Kind.VarInt], // subscription identifier
  [0x11, Kind.FourBytes], // session expiry interval
  [0x12, Kind.Text], // assigned client identifier
  [0x13, Kind.TwoBytes], // server keep alive
  [0x15, Kind.Text], // authentication method
  [0x16, Kind.Binary], // authentication data
  [0x17, Kind.Byte], // request problem information
  [0x18, Kind.FourBytes], // will delay interval
  [0x19, Kind.Byte], // request response information
  [0x1a, Kind.Text], // response information
  [0x1c, Kind.Text], // server reference
  [0x1f, Kind.Text], // reason string
  [0x21, Kind.TwoBytes], // receive maximum
  [0x22, Kind.TwoBytes], // topic alias maximum
  [0x23, Kind.TwoBytes], // topic alias
  [0x24, Kind.Byte], // maximum QoS
  [0x25, Kind.Byte], // retain available
  [0x26, Kind.Pair], // user property
  [0x27, Kind.FourBytes], // maximum packet size
  [0x28, Kind.Byte], // wildcard subscription available
  [0x29, Kind.Byte], // subscription identifier available
  [0x2a, Kind.Byte], // shared subscription available
]);

const USER_PROPERTY = 0x26;
const SUBSCRIPTION_IDENTIFIER = 0x0b;
/** The properties a PUBLISH may carry [MQTT-3.3.2.3]. */
const IN_PUBLISH = new Set([0x01, 0x02, 0x03, 0x08, 0x09, 0x0b, 0x23, 0x26]);

/** A Variable Byte Integer at `at`: its value and the position after it, or undefined when malformed. */
export function readVarInt(buf: Uint8Array, at: number, end = buf.length): { value: number; next: number } | undefined {
  let value = 0;
  let multiplier = 1;
  for (let i = 0; i < 4; i++) {
    if (at + i >= end) return undefined;
    const b = buf[at + i]!;
    value += (b & 0x7f) * multiplier;
    if ((b & 0x80) === 0) return { value, next: at + i + 1 };
    multiplier *= 128;
  }
  return undefined;
}

export function varIntLength(n: number): number {
  return n < 128 ? 1 : n < 16_384 ? 2 : n < 2_097_152 ? 3 : 4;
}

/**
 * Walks the property block whose length varint is at `at`, calling `visit` with each
 * property's id and value bounds. Returns the position after the block, or undefined when
 * it is malformed (an unknown id, a value past the block's end).
 */
function scan(
  buf: Uint8Array,
  at: number,
  end: number,
  visit: (id: number, from: number, to: number) => boolean,
): number | undefined {
  const len = readVarInt(buf, at, end);
  if (!len) return undefined;
  const blockEnd = len.next + len.value;
  if (blockEnd > end) return undefined;
  let pos = len.next;
  while (pos < blockEnd) {
    const id = buf[pos++]!;
    const kind = KIND.get(id);
    if (kind === undefined) return undefined;
    const from = pos;
    switch (kind) {
      case Kind.Byte:
        pos += 1;
        break;
      case Kind.TwoBytes:
        pos += 2;
        break;
      case Kind.FourBytes:
        pos += 4;
        break;
      case Kind.VarInt: {
        const v = readVarInt(buf, pos, blockEnd);
        if (!v) return undefined;
        pos = v.next;
        break;
      }
      case Kind.Text:
      case Kind.Binary:
        if (pos + 2 > blockEnd) return undefined;
        pos += 2 + ((buf[pos]! << 8) | buf[pos + 1]!);
        break;
      case Kind.Pair:
        for (let i = 0; i < 2; i++) {
          if (pos + 2 > blockEnd) return undefined;
          pos += 2 + ((buf[pos]! << 8) | buf[pos + 1]!);
        }
        break;
    }
    if (pos > blockEnd || !visit(id, from, pos)) return undefined;
  }
  return blockEnd;
}

function text(buf: Uint8Array, at: number): string {
  const n = (buf[at]! << 8) | buf[at + 1]!;
  return Buffer.from(buf.buffer, buf.byteOffset + at + 2, n).toString("utf8");
}

function pairAt(buf: Uint8Array, at: number): [string, string] {
  const keyLength = (buf[at]! << 8) | buf[at + 1]!;
  return [text(buf, at), text(buf, at + 2 + keyLength)];
}

const u16 = (b: Uint8Array, at: number) => (b[at]! << 8) | b[at + 1]!;
const u32 = (b: Uint8Array, at: number) => ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;

/**
 * The properties of a PUBLISH, the block's length varint at `at`; undefined when the block
 * is malformed, holds a property a PUBLISH may not carry, or repeats one that may appear
 * once. The caller then leaves the packet to mqtt-packet, whose error answers stand.
 */
export function readPublishProperties(
  buf: Uint8Array,
  at: number,
  end: number,
): { props: PublishProperties | undefined; next: number } | undefined {
  let props: PublishProperties | undefined;
  let seen = 0;
  const next = scan(buf, at, end, (id, from) => {
    if (!IN_PUBLISH.has(id)) return false;
    const p = (props ??= {});
    if (id === USER_PROPERTY) {
      (p.userProperties ??= []).push(pairAt(buf, from));
      return true;
    }
    if (id === SUBSCRIPTION_IDENTIFIER) {
      // A client may not send one [MQTT-3.3.4-6]; mqtt-packet decides what that is.
      return false;
    }
    const bit = id === 0x23 ? 1 << 10 : 1 << id; // ids 0x01..0x09, and the topic alias
    if (seen & bit) return false;
    seen |= bit;
    switch (id) {
      case 0x01:
        p.payloadFormatIndicator = buf[from] !== 0;
        break;
      case 0x02:
        p.messageExpiryInterval = u32(buf, from);
        break;
      case 0x03:
        p.contentType = text(buf, from);
        break;
      case 0x08:
        p.responseTopic = text(buf, from);
        break;
      case 0x09:
        p.correlationData = Buffer.from(buf.subarray(from + 2, from + 2 + u16(buf, from)));
        break;
      case 0x23:
        p.topicAlias = u16(buf, from);
        break;
    }
    return true;
  });
  return next === undefined ? undefined : { props, next };
}

/** The User Properties of a property block (its length varint at `at`), in wire order; undefined when malformed. */
export function userPropertiesAt(buf: Uint8Array, at: number, end: number): Array<[string, string]> | undefined {
  const out: Array<[string, string]> = [];
  const next = scan(buf, at, end, (id, from) => {
    if (id === USER_PROPERTY) out.push(pairAt(buf, from));
    return true;
  });
  return next === undefined ? undefined : out;
}

/** Skips the property block whose length varint is at `at`. */
export function skipProperties(buf: Uint8Array, at: number, end: number): number | undefined {
  const len = readVarInt(buf, at, end);
  return len && len.next + len.value <= end ? len.next + len.value : undefined;
}

// ---------------------------------------------------------------------------------------
// Writing. A value MQTT cannot carry (text or binary over 65,535 bytes) is left out: it
// "does not reach MQTT clients" (mapping-to-nats.md, "What a crossing loses").

const MAX_FIELD = 65_535;

function fieldBytes(s: string): number {
  return Buffer.byteLength(s, "utf8");
}

const carried = (bytes: number) => bytes <= MAX_FIELD;

/** The bytes of a PUBLISH property block's content (without its length varint). */
export function publishPropertiesLength(p: PublishProperties): number {
  let n = 0;
  if (p.payloadFormatIndicator !== undefined) n += 2;
  if (p.messageExpiryInterval !== undefined) n += 5;
  if (p.topicAlias !== undefined) n += 3;
  if (p.responseTopic !== undefined) {
    const b = fieldBytes(p.responseTopic);
    if (carried(b)) n += 3 + b;
  }
  if (p.correlationData !== undefined && carried(p.correlationData.byteLength)) n += 3 + p.correlationData.byteLength;
  if (p.userProperties) {
    for (const [k, v] of p.userProperties) {
      const kb = fieldBytes(k);
      const vb = fieldBytes(v);
      if (carried(kb) && carried(vb)) n += 5 + kb + vb;
    }
  }
  const ids = p.subscriptionIdentifier;
  if (ids !== undefined) for (const id of typeof ids === "number" ? [ids] : ids) n += 1 + varIntLength(id);
  if (p.contentType !== undefined) {
    const b = fieldBytes(p.contentType);
    if (carried(b)) n += 3 + b;
  }
  return n;
}

export function writeVarInt(out: Uint8Array, at: number, n: number): number {
  let pos = at;
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    out[pos++] = b;
  } while (n > 0);
  return pos;
}

function writeText(out: Buffer, at: number, s: string, bytes: number): number {
  out[at] = bytes >> 8;
  out[at + 1] = bytes & 0xff;
  return at + 2 + out.write(s, at + 2, bytes, "utf8");
}

/**
 * Writes the property block (length varint, then the properties, User Properties in list
 * order) at `at`; `length` is `publishPropertiesLength(p)`. Returns the position after it.
 */
export function writePublishProperties(out: Buffer, at: number, p: PublishProperties, length: number): number {
  let pos = writeVarInt(out, at, length);
  if (p.payloadFormatIndicator !== undefined) {
    out[pos++] = 0x01;
    out[pos++] = p.payloadFormatIndicator ? 1 : 0;
  }
  if (p.messageExpiryInterval !== undefined) {
    out[pos++] = 0x02;
    out.writeUInt32BE(p.messageExpiryInterval >>> 0, pos);
    pos += 4;
  }
  if (p.topicAlias !== undefined) {
    out[pos++] = 0x23;
    out[pos++] = p.topicAlias >> 8;
    out[pos++] = p.topicAlias & 0xff;
  }
  if (p.responseTopic !== undefined) {
    const b = fieldBytes(p.responseTopic);
    if (carried(b)) {
      out[pos++] = 0x08;
      pos = writeText(out, pos, p.responseTopic, b);
    }
  }
  if (p.correlationData !== undefined && carried(p.correlationData.byteLength)) {
    const d = p.correlationData;
    out[pos++] = 0x09;
    out[pos++] = d.byteLength >> 8;
    out[pos++] = d.byteLength & 0xff;
    out.set(d, pos);
    pos += d.byteLength;
  }
  if (p.userProperties) {
    for (const [k, v] of p.userProperties) {
      const kb = fieldBytes(k);
      const vb = fieldBytes(v);
      if (!carried(kb) || !carried(vb)) continue;
      out[pos++] = USER_PROPERTY;
      pos = writeText(out, pos, k, kb);
      pos = writeText(out, pos, v, vb);
    }
  }
  const ids = p.subscriptionIdentifier;
  if (ids !== undefined) {
    for (const id of typeof ids === "number" ? [ids] : ids) {
      out[pos++] = SUBSCRIPTION_IDENTIFIER;
      pos = writeVarInt(out, pos, id);
    }
  }
  if (p.contentType !== undefined) {
    const b = fieldBytes(p.contentType);
    if (carried(b)) {
      out[pos++] = 0x03;
      pos = writeText(out, pos, p.contentType, b);
    }
  }
  return pos;
}
