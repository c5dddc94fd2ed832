import { isGatewayOwn } from "./deliveryGuard.js";
import { isWhitespaceOrControl, utf8Length } from "./topic.js";

/**
 * What a client may send in one message, told to MQTT clients (CONNACK Maximum Packet
 * Size) and AMQP clients (the link's max-message-size): what NATS takes in one message
 * (the server's INFO max_payload, headers included) less room for the Mqgw-* headers the
 * gateway adds (docs/decisions/limits.md).
 */

/**
 * Room for the headers of one message. A typical message's Mqgw-* block is 50-400 bytes
 * (QoS, client id, a few properties); 4 KiB leaves room for a long client id and a dozen
 * User Properties. A message whose headers need more still fits the advertised size and is
 * refused with a reason that names max_payload.
 */
export const HEADER_ROOM = 4096;

/** nats-server's own default when a connection has no INFO yet. */
export const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

export function clientMessageLimit(maxPayload: number | undefined): number {
  return Math.max(0, (maxPayload ?? DEFAULT_MAX_PAYLOAD) - HEADER_ROOM);
}

// ---------------------------------------------------------------------------------------
/**
 * What fits on one NATS protocol line. nats-server closes a connection whose line (PUB,
 * HPUB, SUB) exceeds its `max_control_line` (4 KiB by default), and clients with the same
 * credentials share that connection, as the gateway's own work shares the gateway user's.
 * So a client's subject, filter, address or client id is refused before anything is sent
 * when the longest line the gateway would write for it does not fit
 * (docs/decisions/trust-model.md, "Limits").
 */

export interface LineLimits {
  /** UTF-8 bytes of a subject plus its reply subject (a publish), or a subject plus its queue group (a subscription). */
  readonly subjectBytes: number;
  /** UTF-8 bytes of an MQTT client id (its KV key is base64url of it, a third longer). */
  readonly clientIdBytes: number;
}

/** `HPUB <subject> <reply> <header bytes> <total bytes>\r\n` around the two subjects. */
const FRAMING = 32;
/** `.<nuid>.<token>` after an inbox prefix (nats.js request and JetStream reply subjects). */
const INBOX_TAIL = 34;
/**
 * The longest prefix the gateway writes before a client's subject: `$JS.API.CONSUMER.CREATE.
 * <stream>.<consumer>.` of an AMQP durable (a stream name of up to 64 characters, the
 * consumer's 34), longer than `$MQG.retained.` and `$MQG.msgs.`.
 */
const PREFIX = 24 + 64 + 1 + 34 + 1;

export function lineLimits(maxControlLine: number, gatewayId: string, sessionsBucket: string): LineLimits {
  // The gateway's replies: `$MQG.inbox.<id>` (its own user) or `_INBOX.MQGW.<id>` (a client's connection).
  const reply = 12 + utf8Length(gatewayId) + INBOX_TAIL;
  const subjectBytes = Math.max(0, maxControlLine - FRAMING - reply - PREFIX);
  // A session read is a direct get: `$JS.API.DIRECT.GET.KV_<bucket>.$KV.<bucket>.<key>`.
  const kvPrefix = 22 + sessionsBucket.length + 1 + 4 + sessionsBucket.length + 1;
  const keyChars = Math.max(0, maxControlLine - FRAMING - reply - kvPrefix);
  return { subjectBytes, clientIdBytes: Math.floor((keyChars * 3) / 4) };
}

export type SubjectRefusal =
  /** `$MQG.>` or `_INBOX.MQGW.>`: the gateway's own (CONTRACT: not authorized). */
  | { readonly kind: "reserved"; readonly reason: string }
  /** Not a subject NATS can take as a literal: a wildcard or empty token, whitespace, too long (CONTRACT: bad topic). */
  | { readonly kind: "invalid"; readonly reason: string };

/**
 * The checks a literal subject passes at the door, for a subject the gateway made (a
 * route, a relay `to`, a reply subject): a literal subject NATS takes, not the gateway's
 * own, on a line that fits. `full` scans every character; a subject the topic mapping
 * already checked needs only the namespace and the length.
 */
export function publishSubjectProblem(
  subject: string,
  reply: string | undefined,
  maxBytes: number,
  full: boolean,
): SubjectRefusal | undefined {
  if (isGatewayOwn(subject)) return { kind: "reserved", reason: `${clip(subject)} is reserved for the gateway` };
  if (reply !== undefined && isGatewayOwn(reply))
    return { kind: "reserved", reason: `reply subject ${clip(reply)} is reserved for the gateway` };
  if (full) {
    const bad = literalProblem(subject);
    if (bad) return { kind: "invalid", reason: bad };
  }
  if (tooLong(subject, reply, maxBytes))
    return {
      kind: "invalid",
      reason: `subject${reply ? " and reply" : ""} longer than ${maxBytes} bytes (nats.max_control_line)`,
    };
  return undefined;
}

/** True when `a` (and `b`) take more than `max` UTF-8 bytes; 0 is no limit. Short strings are not scanned. */
export function tooLong(a: string, b: string | undefined, max: number): boolean {
  if (max <= 0) return false;
  const units = a.length + (b?.length ?? 0);
  if (units * 3 <= max) return false;
  if (units > max) return true;
  return utf8Length(a) + (b === undefined ? 0 : utf8Length(b)) > max;
}

function literalProblem(subject: string): string | undefined {
  if (subject === "") return "the subject is empty";
  let start = 0;
  for (let i = 0; i <= subject.length; i++) {
    const c = i < subject.length ? subject.charCodeAt(i) : 0x2e;
    if (c === 0x2e) {
      const len = i - start;
      if (len === 0) return `${clip(subject)} has an empty token`;
      if (len === 1 && (subject.charCodeAt(start) === 0x2a || subject.charCodeAt(start) === 0x3e))
        return `${clip(subject)} holds the wildcard ${subject[start]}`;
      start = i + 1;
    } else if (isWhitespaceOrControl(c)) return `${clip(subject)} holds whitespace or a control character`;
  }
  return undefined;
}

/** A subject in a reason string: the start of it (a refused subject may be megabytes long). */
const clip = (s: string): string => JSON.stringify(s.length > 80 ? `${s.slice(0, 80)}...` : s);
