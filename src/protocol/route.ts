/**
 * Route templates: `orders.{region}` turns a send to `orders` into a send to
 * `orders.<region property>`. Values are percent-encoded so that any property value
 * makes exactly one literal NATS token. Decisions: docs/decisions/topic-mapping.md.
 */
import { err, ok, type Result } from "./result.js";
import { isWhitespaceOrControl } from "./topic.js";

export type TemplateToken =
  | { readonly kind: "literal"; readonly text: string }
  | { readonly kind: "property"; readonly name: string };

export interface RouteTemplate {
  readonly template: string;
  readonly tokens: readonly TemplateToken[];
  /** The property names, in template order. */
  readonly names: readonly string[];
}

/** Looks up a message property (MQTT v5 User Property, AMQP application property). */
export type Props = (name: string) => string | undefined;

/**
 * Tokens are separated by `.`; a token is a literal or a whole-token `{name}`.
 * Mixed tokens like `eu-{zone}` are refused: a whole token keeps matching a subject
 * back to its properties a plain token comparison.
 */
export function parseTemplate(template: string): Result<RouteTemplate> {
  if (template === "") return err("template is empty");
  const tokens: TemplateToken[] = [];
  const names: string[] = [];
  for (const part of template.split(".")) {
    if (part === "") return err(`template "${template}" has an empty token`);
    for (let i = 0; i < part.length; i++) {
      if (isWhitespaceOrControl(part.charCodeAt(i))) {
        return err(`template "${template}" holds whitespace or a control character`);
      }
    }
    const open = part.indexOf("{");
    const close = part.indexOf("}");
    if (open < 0 && close < 0) {
      if (part === "*" || part === ">" || part.includes("+") || part.includes("#")) {
        return err(`template "${template}" holds a wildcard ("${part}")`);
      }
      tokens.push({ kind: "literal", text: part });
      continue;
    }
    const balanced = open >= 0 && close > open && part.indexOf("{", open + 1) < 0 && part.indexOf("}", close + 1) < 0;
    if (!balanced) return err(`template "${template}" has unbalanced braces in "${part}"`);
    if (open !== 0 || close !== part.length - 1) {
      return err(`template "${template}": a placeholder must be a whole token, not "${part}"`);
    }
    const name = part.slice(1, -1);
    if (name === "") return err(`template "${template}" has an empty placeholder {}`);
    if (names.includes(name)) return err(`template "${template}" names {${name}} twice`);
    tokens.push({ kind: "property", name });
    names.push(name);
  }
  if (names.length === 0) return err(`template "${template}" has no {name} placeholder`);
  const first = tokens[0]!;
  if (
    first.kind === "literal" &&
    (first.text === "$MQG" || (first.text === "_INBOX" && tokens[1]?.kind === "literal" && tokens[1].text === "MQGW"))
  )
    return err(`template "${template}" builds subjects reserved for the gateway`);
  return ok({ template, tokens, names });
}

/** The subject a routed message goes to; a missing property is named so the client can be told. */
export function buildSubject(t: RouteTemplate, props: Props): Result<string, { missing: string }> {
  let subject = "";
  for (const token of t.tokens) {
    let text: string;
    if (token.kind === "literal") text = token.text;
    else {
      const value = props(token.name);
      if (value === undefined) return err({ missing: token.name });
      text = encodeRouteValue(value);
    }
    subject = subject === "" ? text : `${subject}.${text}`;
  }
  return ok(subject);
}

const HEX = "0123456789ABCDEF";

const DOLLAR = 0x24;

function needsEncoding(c: number): boolean {
  // . / + # and % are the characters the spec names; `%` so that decoding is exact.
  return c === 0x2e || c === 0x25 || c === 0x2f || c === 0x2b || c === 0x23 || isWhitespaceOrControl(c);
}

/**
 * One literal NATS token for any value: the spec's characters (`.`, `%`, `/`, `+`, `#`,
 * whitespace, controls) and a leading `$` become `%XX` of their UTF-8 bytes, upper-case hex. Other
 * non-ASCII stays as it is, so NATS clients can subscribe to `orders.zürich`. A lone
 * surrogate (no UTF-8 form) is written as U+FFFD, as any UTF-8 encoder would.
 */
export function encodeRouteValue(v: string): string {
  if (v === "") return "%"; // a token cannot be empty, and no other encoding is a lone %
  if (v === "*") return "%2A";
  if (v === ">") return "%3E";
  // A leading `$` names a system namespace when the value lands first ($MQG, $JS, $SYS,
  // $KV), and a `$` topic escapes MQTT's `#` and `+` [MQTT-4.7.2-1]: a value is data, never that.
  if (v.charCodeAt(0) === DOLLAR) return `%24${encodeChars(v, 1)}`;
  return encodeChars(v, 0);
}

function encodeChars(v: string, from: number): string {
  let i = from;
  while (i < v.length && !needsEncoding(v.charCodeAt(i)) && !isSurrogate(v.charCodeAt(i))) i++;
  if (i === v.length) return from === 0 ? v : v.slice(from);

  let out = v.slice(from, i);
  for (; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (isSurrogate(c)) {
      const low = v.charCodeAt(i + 1);
      if (c < 0xdc00 && (low & 0xfc00) === 0xdc00) {
        out += v[i]! + v[i + 1]!; // a pair is never whitespace or a control
        i++;
      } else out += "%EF%BF%BD";
    } else if (needsEncoding(c)) out += percentUtf8(c);
    else out += v[i]!;
  }
  return out;
}

const isSurrogate = (c: number): boolean => (c & 0xf800) === 0xd800;

/** `%XX` of the UTF-8 bytes of a code point below U+10000. */
function percentUtf8(c: number): string {
  const hex = (b: number) => `%${HEX[b >> 4]}${HEX[b & 15]}`;
  if (c < 0x80) return hex(c);
  if (c < 0x800) return hex(0xc0 | (c >> 6)) + hex(0x80 | (c & 63));
  return hex(0xe0 | (c >> 12)) + hex(0x80 | ((c >> 6) & 63)) + hex(0x80 | (c & 63));
}

// ignoreBOM: a value may start with U+FEFF, and decoding must keep it.
const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });

/**
 * Inverse of encodeRouteValue. Lenient with tokens it did not make (a NATS client may
 * send anything): a `%` without two hex digits stays as it is, and bytes that are not
 * UTF-8 become U+FFFD.
 */
export function decodeRouteValue(s: string): string {
  if (s === "%") return "";
  if (s.indexOf("%") < 0) return s;
  let out = "";
  let i = 0;
  while (i < s.length) {
    const bytes: number[] = [];
    while (s.charCodeAt(i) === 0x25 && isHex(s.charCodeAt(i + 1)) && isHex(s.charCodeAt(i + 2))) {
      bytes.push(Number.parseInt(s.slice(i + 1, i + 3), 16));
      i += 3;
    }
    if (bytes.length > 0) out += utf8.decode(Uint8Array.from(bytes));
    else out += s[i++]!;
  }
  return out;
}

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
}

/**
 * The property values a subject was built from, when it is exactly a subject this
 * template builds (so `orders.eu%2e` or `orders.eu%2` are not: no value encodes to them).
 */
export function matchBuiltSubject(t: RouteTemplate, subject: string): Record<string, string> | undefined {
  const parts = subject.split(".");
  if (parts.length !== t.tokens.length) return undefined;
  // No prototype: a property may well be called __proto__.
  const values: Record<string, string> = Object.create(null);
  for (let i = 0; i < parts.length; i++) {
    const token = t.tokens[i]!;
    const part = parts[i]!;
    if (token.kind === "literal") {
      if (part !== token.text) return undefined;
      continue;
    }
    const value = decodeRouteValue(part);
    if (encodeRouteValue(value) !== part) return undefined;
    values[token.name] = value;
  }
  return values;
}

/**
 * For a send straight to a subject the template makes: the first property that is
 * missing or disagrees with the subject (for the reason string), else undefined.
 * A subject the template does not make has nothing to disagree with.
 */
export function firstDisagreement(t: RouteTemplate, subject: string, props: Props): string | undefined {
  const values = matchBuiltSubject(t, subject);
  if (values === undefined) return undefined;
  return t.names.find((name) => props(name) !== values[name]);
}

/** False when the subject is one the template makes and a property is missing or differs. */
export function agreesWithProps(t: RouteTemplate, subject: string, props: Props): boolean {
  return firstDisagreement(t, subject, props) === undefined;
}
