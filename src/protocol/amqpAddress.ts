/**
 * AMQP link addresses -> what the gateway does with them (mapping-to-nats.md, "AMQP
 * addresses"). An address is the NATS subject itself, with no conversion; a refusal
 * carries the AMQP condition of CONTRACT.md's error table for the detach.
 */
import { isGatewayOwn } from "./deliveryGuard.js";
import { err, ok, type Result } from "./result.js";
import { isWhitespaceOrControl } from "./topic.js";

export type AddressCondition = "amqp:invalid-field" | "amqp:unauthorized-access";

export interface AddressRefusal {
  readonly condition: AddressCondition;
  readonly description: string;
}

export type TargetAddress =
  /** Publish every message to this subject. */
  | { readonly kind: "subject"; readonly subject: string }
  /** A null target, the anonymous relay: each message's `to` is its subject (validateRelayTo). */
  | { readonly kind: "anonymous" }
  /** The gateway names a new inbox subject for replies. */
  | { readonly kind: "dynamic" };

export type SourceAddress =
  | { readonly kind: "subject"; readonly subject: string }
  /** A subject with `*` or `>` tokens. */
  | { readonly kind: "wildcard"; readonly subject: string }
  /** `<address>::<queue>`: the stream consumer an operator made; the address may hold wildcards. */
  | { readonly kind: "queue"; readonly subject: string; readonly queue: string; readonly wildcard: boolean }
  | { readonly kind: "dynamic" };

const ADMIN = "$MQG";
const QUEUE_SEPARATOR = "::";

/**
 * The gateway's own subjects, refused to MQTT and AMQP clients alike. CONTRACT.md fixes
 * the prefix as $MQG; the `$MQGW.admin.>` in mapping-to-nats.md is a typo for it, so
 * `$MQGW...` is an ordinary subject. `_INBOX.MQGW.>` (the gateway's requests on client
 * connections) is the gateway's too (deliveryGuard.ts).
 */
export const subjectIsAdmin = isGatewayOwn;

const invalid = (description: string) => err<AddressRefusal>({ condition: "amqp:invalid-field", description });
const unauthorized = (description: string) =>
  err<AddressRefusal>({ condition: "amqp:unauthorized-access", description });

const isAbsent = (a: string | null | undefined): a is null | undefined | "" =>
  a === null || a === undefined || a === "";

/** Checks a subject or (with wildcards allowed) a pattern; ok(true) when it holds wildcards. */
function checkSubject(s: string, what: string, wildcards: boolean): Result<boolean, AddressRefusal> {
  for (let i = 0; i < s.length; i++) {
    if (isWhitespaceOrControl(s.charCodeAt(i)))
      return invalid(`${what} ${JSON.stringify(s)} holds whitespace or a control character`);
  }
  const tokens = s.split(".");
  let wildcard = false;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (t === "") return invalid(`${what} ${JSON.stringify(s)} has an empty token`);
    if (t !== "*" && t !== ">") continue;
    if (!wildcards) return invalid(`${what} ${JSON.stringify(s)} holds the wildcard ${t}`);
    if (t === ">" && i !== tokens.length - 1) return invalid(`${what} ${JSON.stringify(s)}: > must be the last token`);
    wildcard = true;
  }
  if (subjectIsAdmin(s)) return unauthorized(`${what} ${JSON.stringify(s)}: ${ADMIN} is reserved for the gateway`);
  return ok(wildcard);
}

/** JetStream consumer names: no whitespace, `.`, `*`, `>` or path separators. */
function checkQueueName(q: string): Result<string, AddressRefusal> {
  if (q === "") return invalid("the queue name after :: is empty");
  for (let i = 0; i < q.length; i++) {
    const c = q.charCodeAt(i);
    if (isWhitespaceOrControl(c) || c === 0x2e || c === 0x2a || c === 0x3e || c === 0x2f || c === 0x5c) {
      return invalid(`queue name ${JSON.stringify(q)} is not a consumer name (no whitespace, . * > / \\)`);
    }
  }
  return ok(q);
}

/** The target of a link the client sends on (the gateway's receiver). */
export function classifyTarget(
  address: string | null | undefined,
  dynamic: boolean,
): Result<TargetAddress, AddressRefusal> {
  if (dynamic) return isAbsent(address) ? ok({ kind: "dynamic" }) : invalid("a dynamic target has no address");
  if (isAbsent(address)) return ok({ kind: "anonymous" });
  const checked = checkSubject(address, "target", false);
  return checked.ok ? ok({ kind: "subject", subject: address }) : checked;
}

/** The source of a link the client receives on (the gateway's sender). */
export function classifySource(
  address: string | null | undefined,
  dynamic: boolean,
): Result<SourceAddress, AddressRefusal> {
  if (dynamic) return isAbsent(address) ? ok({ kind: "dynamic" }) : invalid("a dynamic source has no address");
  if (isAbsent(address)) return invalid("a source needs an address");
  // The last "::": a subject may hold colons, a queue name's own "::" would be unreadable either way.
  const sep = address.lastIndexOf(QUEUE_SEPARATOR);
  const subject = sep < 0 ? address : address.slice(0, sep);
  if (sep >= 0 && subject === "") return invalid(`source ${JSON.stringify(address)} has no address before ::`);
  const checked = checkSubject(subject, "source", true);
  if (!checked.ok) return checked;
  if (sep < 0) return ok(checked.value ? { kind: "wildcard", subject } : { kind: "subject", subject });
  const queue = checkQueueName(address.slice(sep + QUEUE_SEPARATOR.length));
  return queue.ok ? ok({ kind: "queue", subject, queue: queue.value, wildcard: checked.value }) : queue;
}

/** The `to` of one message sent to the anonymous relay: the same rules as a target. */
export function validateRelayTo(to: string | null | undefined): Result<string, AddressRefusal> {
  if (isAbsent(to)) return invalid("a message to the anonymous relay needs a to address");
  const checked = checkSubject(to, "to", false);
  return checked.ok ? ok(to) : checked;
}

/** An address whose NATS protocol line would not fit (nats.max_control_line; natsLimits.ts). */
export function addressTooLong(maxBytes: number): AddressRefusal {
  return {
    condition: "amqp:invalid-field",
    description: `address longer than ${maxBytes} bytes (nats.max_control_line)`,
  };
}

/**
 * limits.max_topic_levels for AMQP (docs/config.md: "tokens of an AMQP address"): a deep
 * subject costs every subscription match on the server. `max` 0 is no limit.
 */
export function tooManyTokens(subject: string, max: number): AddressRefusal | undefined {
  if (max <= 0) return undefined;
  let tokens = 1;
  for (let i = 0; i < subject.length; i++) {
    if (subject.charCodeAt(i) === 0x2e && ++tokens > max)
      return {
        condition: "amqp:invalid-field",
        description: `address ${JSON.stringify(subject)} has more than ${max} tokens (limits.max_topic_levels)`,
      };
  }
  return undefined;
}
