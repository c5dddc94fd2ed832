/**
 * The stream's answer to a JetStream publish, read without JSON.parse (docs/performance.md,
 * QoS 1): nats-server writes it as `{"stream":"<name>","seq":<n>}` with `,"duplicate":true`
 * before the `}` when the Nats-Msg-Id was seen. Exactly those shapes are read here, from the
 * bytes; anything else (an error, a domain, spaces, escapes, non-ASCII) gives undefined and
 * the caller parses it as JSON. The stream name is reused from the previous call when its
 * bytes match, so the common case allocates only the result.
 */
export interface PubAck {
  readonly stream: string;
  readonly seq: number;
  readonly duplicate: boolean;
}

const HEAD = bytes('{"stream":"');
const SEQ = bytes('","seq":');
const DUP = bytes(',"duplicate":true}');
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

let lastName = "";

export function readPubAck(b: Uint8Array): PubAck | undefined {
  if (!startsAt(b, 0, HEAD)) return undefined;
  let i = HEAD.length;
  const nameStart = i;
  while (i < b.length && b[i] !== QUOTE) {
    const c = b[i]!;
    if (c <= 0x20 || c >= 0x7f || c === BACKSLASH) return undefined;
    i++;
  }
  const nameEnd = i;
  if (nameEnd === nameStart || !startsAt(b, nameEnd, SEQ)) return undefined;
  i = nameEnd + SEQ.length;
  const digits = i;
  let seq = 0;
  while (i < b.length && b[i]! >= 0x30 && b[i]! <= 0x39) seq = seq * 10 + (b[i++]! - 0x30);
  // No digits, a leading zero JSON forbids, or beyond what a double holds exactly.
  if (i === digits || i - digits > 15 || (b[digits] === 0x30 && i - digits > 1)) return undefined;
  let duplicate = false;
  if (i === b.length - 1 && b[i] === 0x7d) duplicate = false;
  else if (i + DUP.length === b.length && startsAt(b, i, DUP)) duplicate = true;
  else return undefined;
  return { stream: nameOf(b, nameStart, nameEnd), seq, duplicate };
}

function nameOf(b: Uint8Array, start: number, end: number): string {
  const n = end - start;
  if (lastName.length === n) {
    let same = true;
    for (let k = 0; k < n; k++) {
      if (lastName.charCodeAt(k) !== b[start + k]) {
        same = false;
        break;
      }
    }
    if (same) return lastName;
  }
  let s = "";
  for (let k = start; k < end; k++) s += String.fromCharCode(b[k]!);
  lastName = s;
  return s;
}

function startsAt(b: Uint8Array, at: number, p: Uint8Array): boolean {
  if (at + p.length > b.length) return false;
  for (let k = 0; k < p.length; k++) if (b[at + k] !== p[k]) return false;
  return true;
}

function bytes(s: string): Uint8Array {
  return new TextEncoder().encode(s);
}
