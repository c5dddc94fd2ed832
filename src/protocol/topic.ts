/**
 * MQTT topic names and filters <-> NATS subjects, by the rules of nats-server's MQTT
 * support (server/mqtt.go), so MQTT clients of nats-server and of the gateway see the
 * same subjects. Where the gateway's spec is stricter, see docs/decisions/topic-mapping.md.
 *
 *   MQTT level separator `/` <-> NATS token separator `.`
 *   `.` inside a level       <-> `//`
 *   an empty level           <-> the token `/`
 *   `+` / `#` (filters)       -> `*` / `>` (plus the parent subject for `#`)
 *
 * These run once per message, so they are char-code scans that allocate nothing but
 * their answer, and a topic with nothing to convert comes back as the same string.
 */
import { err, ok, type Result } from "./result.js";

const SLASH = 0x2f;
const DOT = 0x2e;
const PLUS = 0x2b;
const HASH = 0x23;
const STAR = 0x2a;
const GT = 0x3e;
const DOLLAR = 0x24;

/** MQTT strings carry a two-byte length: nothing longer can reach or leave a client. */
export const MAX_TOPIC_BYTES = 65_535;

/** A string of at most this many UTF-16 units cannot exceed MAX_TOPIC_BYTES in UTF-8. */
const SURELY_SHORT = Math.floor(MAX_TOPIC_BYTES / 3);

const SHARE_PREFIX = "$share/";

/**
 * Whitespace (Unicode White_Space, not only ASCII: the spec says "whitespace") and control
 * characters (C0, DEL, C1). NATS splits its protocol lines on ASCII whitespace,
 * nats-server's subject tree uses DEL as a marker, and MQTT forbids U+0000 and asks
 * clients to avoid the other controls. Route values percent-encode the same set.
 */
export function isWhitespaceOrControl(code: number): boolean {
  if (code <= 0x20) return true;
  if (code < 0x7f) return false;
  if (code <= 0xa0) return true; // DEL, C1 (NEL among them), NO-BREAK SPACE
  if (code < 0x1680) return false;
  return (
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000
  );
}

/** UTF-8 length; a lone surrogate counts as the 3-byte U+FFFD an encoder would write. */
export function utf8Length(s: string): number {
  let bytes = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (isHighSurrogate(c) && isLowSurrogate(s.charCodeAt(i + 1))) {
      bytes += 4;
      i++;
    } else bytes += 3;
  }
  return bytes;
}

const isHighSurrogate = (c: number): boolean => (c & 0xfc00) === 0xd800;
const isLowSurrogate = (c: number): boolean => (c & 0xfc00) === 0xdc00;

/**
 * What is being checked, as each allows different wildcards. publish: a PUBLISH topic
 * name, none at all. filter: a SUBSCRIBE filter, `+` and `#` as whole levels. delivered:
 * a topic made from a NATS subject, where `*` and `>` levels stay (spec) and `+`/`#` never.
 */
type Kind = "publish" | "filter" | "delivered";

/** Why `text` (from index `from` on) is refused, or undefined when it is fine. */
function refusal(text: string, from: number, kind: Kind): string | undefined {
  const n = text.length;
  const name = kind === "filter" ? "topic filter" : "topic";
  if (from >= n) return `${name} is empty`;
  let level = from;
  for (let i = from; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === SLASH) {
      if (kind !== "delivered" && isNatsWildcardLevel(text, level, i)) return natsWildcardLevel(name);
      level = i + 1;
    } else if (c === PLUS || c === HASH) {
      if (kind !== "filter") return "a topic name cannot hold the wildcards + or #";
      if (i !== level || (i + 1 < n && text.charCodeAt(i + 1) !== SLASH)) return "+ and # must be a whole level";
      if (c === HASH && i + 1 !== n) return "# must be the last level";
    } else if (c < 0x80) {
      if (c <= 0x20 || c === 0x7f) return `${name} holds whitespace or a control character`;
    } else if (isHighSurrogate(c) && isLowSurrogate(text.charCodeAt(i + 1))) {
      i++;
    } else if (isHighSurrogate(c) || isLowSurrogate(c)) {
      return `${name} is not well-formed Unicode (lone surrogate)`;
    } else if (isWhitespaceOrControl(c)) {
      return `${name} holds whitespace or a control character`;
    }
  }
  if (kind !== "delivered" && isNatsWildcardLevel(text, level, n)) return natsWildcardLevel(name);
  if (n > SURELY_SHORT && utf8Length(text) > MAX_TOPIC_BYTES) return `${name} is longer than 65535 bytes`;
  return undefined;
}

const natsWildcardLevel = (name: string): string =>
  `${name} has a level of only * or >, which NATS reads as a wildcard`;

function isNatsWildcardLevel(text: string, start: number, end: number): boolean {
  if (end - start !== 1) return false;
  const c = text.charCodeAt(start);
  return c === STAR || c === GT;
}

/**
 * Levels -> tokens, for text that `refusal` accepted (so `+` and `#` are whole levels).
 * Built from slices: string concatenation is cheaper here than replaceAll or split/join.
 */
function levelsToSubject(levels: string): string {
  const n = levels.length;
  let out = "";
  let copied = 0; // levels[copied, i) is still to be copied
  let level = 0; // start of the current level
  for (let i = 0; i < n; i++) {
    const c = levels.charCodeAt(i);
    if (c === SLASH) {
      out += i === level ? "/." : `${levels.slice(copied, i)}.`;
      copied = level = i + 1;
    } else if (c === DOT) {
      out += `${levels.slice(copied, i)}//`;
      copied = i + 1;
    } else if (c === PLUS || c === HASH) {
      out += c === PLUS ? "*" : ">";
      copied = i + 1;
    }
  }
  return level === n ? `${out}/` : out + levels.slice(copied);
}

/** The NATS subject a PUBLISH (or will, or retained message) to `topic` goes to. */
export function publishTopicToSubject(topic: string): Result<string> {
  const why = refusal(topic, 0, "publish");
  return why === undefined ? ok(levelsToSubject(topic)) : err(why);
}

export interface Subscription {
  /** NATS subjects to subscribe; `a/#` needs `a.>` and `a`, since `#` also matches its parent level. */
  readonly subjects: string[];
  /** The NATS queue group of a shared subscription (`$share/<group>/...`). */
  readonly queue?: string;
  /** The filter starts with a wildcard, so it must not get topics starting with `$` [MQTT-4.7.2-1]. */
  readonly dollarGuard: boolean;
}

/** Where the topic filter starts, and the share name, of a possibly shared filter. */
function splitShare(filter: string): Result<{ from: number; queue?: string }> {
  if (!filter.startsWith(SHARE_PREFIX)) return ok({ from: 0 });
  const slash = filter.indexOf("/", SHARE_PREFIX.length);
  if (slash < 0) return err("shared subscription has no topic filter after the share name");
  if (slash === SHARE_PREFIX.length) return err("shared subscription has an empty share name");
  for (let i = SHARE_PREFIX.length; i < slash; i++) {
    const c = filter.charCodeAt(i);
    if (isHighSurrogate(c) && isLowSurrogate(filter.charCodeAt(i + 1))) {
      i++;
    } else if (c === PLUS || c === HASH || isWhitespaceOrControl(c) || isHighSurrogate(c) || isLowSurrogate(c)) {
      // [MQTT-4.8.2-2] forbids + and # in a share name; a NATS queue name cannot hold whitespace.
      return err("share name cannot hold +, #, whitespace, control characters or lone surrogates");
    }
  }
  return ok({ from: slash + 1, queue: filter.slice(SHARE_PREFIX.length, slash) });
}

/** The NATS subscription(s) for an MQTT SUBSCRIBE filter, shared (`$share/g/...`) or not. */
export function filterToSubscription(filter: string): Result<Subscription> {
  const share = splitShare(filter);
  if (!share.ok) return share;
  const { from, queue } = share.value;
  const why = refusal(filter, from, "filter");
  if (why !== undefined) return err(why);

  const inner = from === 0 ? filter : filter.slice(from);
  const subject = levelsToSubject(inner);
  const first = inner.charCodeAt(0);
  const dollarGuard = first === PLUS || first === HASH;
  let subjects: string[];
  if (inner.charCodeAt(inner.length - 1) !== HASH) subjects = [subject];
  else if (inner.length === 1) subjects = [">"];
  else subjects = [subject, subject.slice(0, -2)]; // `a.>` and its parent `a`
  return ok(queue === undefined ? { subjects, dollarGuard } : { subjects, queue, dollarGuard });
}

/**
 * The MQTT topic a message on `subject` is delivered with, or undefined when no MQTT
 * client may get it: the subject holds `+` or `#`, or it is not the image of any topic
 * (a stray `/`, an empty token), or the topic would be one MQTT cannot carry.
 * `*` and `>` tokens stay as they are.
 */
export function subjectToTopic(subject: string): string | undefined {
  const n = subject.length;
  let topic = "";
  let copied = 0; // subject[copied, i) is still to be copied
  let token = 0; // start of the current token
  for (let i = 0; i < n; i++) {
    const c = subject.charCodeAt(i);
    if (c === DOT) {
      if (i === token) return undefined;
      topic += `${subject.slice(copied, i)}/`;
      copied = token = i + 1;
    } else if (c === SLASH) {
      const next = subject.charCodeAt(i + 1); // NaN past the end
      if (next === SLASH) {
        topic += `${subject.slice(copied, i)}.`; // `//` is a dot inside a level
        i++;
        copied = i + 1;
      } else if (i === token && (i + 1 === n || next === DOT)) {
        copied = i + 1; // a whole `/` token is an empty level
      } else return undefined;
    }
  }
  if (token >= n) return undefined; // empty subject or empty last token
  topic += subject.slice(copied);
  return refusal(topic, 0, "delivered") === undefined ? topic : undefined;
}

/** False for a `$` topic on a subscription whose filter starts with a wildcard [MQTT-4.7.2-1]. */
export function deliverableTo(topic: string, dollarGuard: boolean): boolean {
  return !(dollarGuard && topic.charCodeAt(0) === DOLLAR);
}

/**
 * MQTT topic matching (retained messages, overlapping subscriptions). A shared filter
 * matches by its topic filter part, as its NATS subscription does. False when the filter
 * is one `filterToSubscription` refuses, or the topic is not a deliverable topic.
 */
export function topicMatchesFilter(topic: string, filter: string): boolean {
  const share = splitShare(filter);
  if (!share.ok) return false;
  const from = share.value.from;
  if (refusal(filter, from, "filter") !== undefined) return false;
  if (refusal(topic, 0, "delivered") !== undefined) return false;
  const first = filter.charCodeAt(from);
  if (!deliverableTo(topic, first === PLUS || first === HASH)) return false;

  // `t` past the topic's end means "no levels left", which only `#` (the parent rule) accepts.
  const tn = topic.length;
  const fn = filter.length;
  let t = 0;
  let f = from;
  while (f <= fn) {
    let fEnd = filter.indexOf("/", f);
    if (fEnd < 0) fEnd = fn;
    const fc = filter.charCodeAt(f);
    if (fc === HASH) return true;
    if (t > tn) return false;
    let tEnd = topic.indexOf("/", t);
    if (tEnd < 0) tEnd = tn;
    if (!(fc === PLUS && fEnd - f === 1) && !sameLevel(topic, t, tEnd, filter, f, fEnd)) return false;
    t = tEnd + 1;
    f = fEnd + 1;
  }
  return t > tn;
}

function sameLevel(a: string, aStart: number, aEnd: number, b: string, bStart: number, bEnd: number): boolean {
  if (aEnd - aStart !== bEnd - bStart) return false;
  for (let i = 0; i < aEnd - aStart; i++) {
    if (a.charCodeAt(aStart + i) !== b.charCodeAt(bStart + i)) return false;
  }
  return true;
}
