/**
 * A NATS header block ("NATS/1.0\r\nKey: Value\r\n...\r\n\r\n") read straight from its
 * bytes (docs/performance.md): nats.js's `MsgHdrsImpl.decode` canonicalizes and validates
 * each key and allocates several arrays per header, which made header decoding a third of
 * the gateway's allocation per stored message. The answer is what `keys()`/`values(k)` of
 * the decoded MsgHdrs give: pairs grouped by key in first-seen order, values trimmed.
 * Only plain blocks are read here: no status line, printable ASCII, keys nats.js accepts.
 * Anything else returns undefined and the caller asks nats.js, so odd input behaves as before.
 */
const PREFIX = [0x4e, 0x41, 0x54, 0x53, 0x2f, 0x31, 0x2e, 0x30, 0x0d, 0x0a]; // "NATS/1.0\r\n"

export function plainHeaderPairs(block: Uint8Array): Array<[string, string]> | undefined {
  // One Buffer view for the whole block: its latin1 slices are the cheapest way to strings.
  const bytes = Buffer.from(block.buffer, block.byteOffset, block.length);
  const out: Array<[string, string]> = [];
  let interleaved = false;
  const plain = eachPlainLine(block, (pos, colon, eol) => {
    const key = bytes.toString("latin1", pos, colon);
    const value = bytes.toString("latin1", colon + 1, eol).trim();
    if (!interleaved && out.length > 0 && out[out.length - 1]![0] !== key) {
      for (let i = 0; i < out.length - 1; i++) if (out[i]![0] === key) interleaved = true;
    }
    out.push([key, value]);
  });
  if (!plain) return undefined;
  return interleaved ? groupByKey(out) : out;
}

/**
 * Calls `line` with each header line's key start, colon and end of line, after checking
 * the line is plain; false (and no more calls) at the first thing that is not: a missing
 * prefix, a byte outside what nats.js accepts, a line without CRLF or without a key.
 */
function eachPlainLine(block: Uint8Array, line: (pos: number, colon: number, eol: number) => void): boolean {
  const n = block.length;
  if (n < PREFIX.length) return false;
  for (let i = 0; i < PREFIX.length; i++) if (block[i] !== PREFIX[i]) return false;
  let pos = PREFIX.length;
  while (pos < n) {
    let eol = pos;
    let colon = -1;
    for (; eol < n; eol++) {
      const c = block[eol]!;
      if (c === 0x0d) break;
      if (c === 0x3a && colon < 0) colon = eol;
      // A key is 33..126 (nats.js throws on anything else); a value printable ASCII or tab.
      else if (colon < 0 ? c < 33 || c > 126 : (c < 0x20 && c !== 0x09) || c > 0x7e) return false;
    }
    if (eol + 1 >= n || block[eol + 1] !== 0x0a) return false;
    if (eol > pos) {
      if (colon <= pos) return false;
      line(pos, colon, eol);
    }
    pos = eol + 2;
  }
  return true;
}

/** Values of a key together, keys in first-seen order (as a MsgHdrs keeps them). */
function groupByKey(pairs: Array<[string, string]>): Array<[string, string]> {
  const order: string[] = [];
  const byKey = new Map<string, string[]>();
  for (const [k, v] of pairs) {
    const vs = byKey.get(k);
    if (vs) vs.push(v);
    else {
      byKey.set(k, [v]);
      order.push(k);
    }
  }
  const out: Array<[string, string]> = [];
  for (const k of order) for (const v of byKey.get(k)!) out.push([k, v]);
  return out;
}

/**
 * The header block nats.js's MsgHdrs would encode for `pairs` appended in order and then
 * `set(lastKey, lastValue)`, made without MsgHdrs (docs/performance.md, QoS 1): appending
 * each pair canonicalizes and validates its key and allocates arrays, about a tenth of
 * the gateway's allocation per stored publish. Same bytes (property test against
 * nats.js): keys grouped in first-seen order, values trimmed, `lastKey` replacing any
 * earlier pair of the same key and coming last. Undefined when nats.js would refuse a
 * key or value, so the caller goes through MsgHdrs and fails the same way.
 */
export function encodeHeaderBlock(
  pairs: ReadonlyArray<readonly [string, string]>,
  lastKey: string,
  lastValue: string,
): Uint8Array | undefined {
  if (!validKey(lastKey) || /[\r\n]/.test(lastValue)) return undefined;
  let s = "NATS/1.0";
  for (let i = 0; i < pairs.length; i++) {
    const k = pairs[i]![0];
    if (k === lastKey) {
      if (/[\r\n]/.test(pairs[i]![1])) return undefined;
      continue;
    }
    if (!validKey(k)) return undefined;
    let seen = false;
    for (let j = 0; j < i; j++) {
      if (pairs[j]![0] === k) {
        seen = true;
        break;
      }
    }
    if (seen) continue;
    for (let j = i; j < pairs.length; j++) {
      const p = pairs[j]!;
      if (p[0] !== k) continue;
      if (/[\r\n]/.test(p[1])) return undefined;
      s += `\r\n${k}: ${p[1].trim()}`;
    }
  }
  s += `\r\n${lastKey}: ${lastValue.trim()}\r\n\r\n`;
  return Buffer.from(s, "utf8");
}

/** What nats.js's canonicalMIMEHeaderKey accepts: 33..126 but ':'. */
function validKey(k: string): boolean {
  if (k.length === 0) return true;
  for (let i = 0; i < k.length; i++) {
    const c = k.charCodeAt(i);
    if (c === 0x3a || c < 33 || c > 126) return false;
  }
  return true;
}

const QOS_KEY = "mqgw-qos";

/**
 * Whether a plain header block says `Mqgw-QoS: 1` or `2` (its first key equal to
 * Mqgw-QoS in any case decides), without making strings: the QoS 1 copy of a stored
 * message that reaches a stored subscription's live subscription is dropped on this
 * (its consumer delivers it). Undefined exactly where `plainHeaderPairs` is, so the
 * caller then reads the headers as before.
 */
export function plainBlockSaysQos12(block: Uint8Array): boolean | undefined {
  let answer: boolean | undefined;
  // The whole block is checked first: a malformed one is left to the full reader.
  const plain = eachPlainLine(block, (pos, colon, eol) => {
    if (answer === undefined && colon - pos === QOS_KEY.length && isQosKey(block, pos))
      answer = isOneOrTwo(block, colon + 1, eol);
  });
  return plain ? (answer ?? false) : undefined;
}

function isQosKey(b: Uint8Array, at: number): boolean {
  return isKey(b, at, QOS_KEY);
}

/** The value between `from` and `to`, spaces and tabs trimmed, is "1" or "2". */
function isOneOrTwo(b: Uint8Array, from: number, to: number): boolean {
  while (from < to && (b[from] === 0x20 || b[from] === 0x09)) from++;
  while (to > from && (b[to - 1] === 0x20 || b[to - 1] === 0x09)) to--;
  return to - from === 1 && (b[from] === 0x31 || b[from] === 0x32);
}

const MSG_ID_KEY = "nats-msg-id";

/**
 * Whether a plain header block marks a stored message's core copy: `Mqgw-QoS` 1 or 2 and a
 * `Nats-Msg-Id` (docs/decisions/mqtt-store.md). A subscription whose QoS 1/2 messages a
 * consumer delivers drops these on the bytes. Undefined where `plainHeaderPairs` is.
 */
export function plainBlockSaysStoredCopy(block: Uint8Array): boolean | undefined {
  let qos: boolean | undefined;
  let msgId = false;
  const plain = eachPlainLine(block, (pos, colon, eol) => {
    if (qos === undefined && colon - pos === QOS_KEY.length && isKey(block, pos, QOS_KEY))
      qos = isOneOrTwo(block, colon + 1, eol);
    else if (colon - pos === MSG_ID_KEY.length && isKey(block, pos, MSG_ID_KEY)) msgId = true;
  });
  return plain ? qos === true && msgId : undefined;
}

function isKey(b: Uint8Array, at: number, lower: string): boolean {
  for (let i = 0; i < lower.length; i++) if ((b[at + i]! | 0x20) !== lower.charCodeAt(i)) return false;
  return true;
}
