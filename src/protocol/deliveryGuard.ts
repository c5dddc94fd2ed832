/**
 * What a client subscription may be given (docs/decisions/trust-model.md). NATS routes a
 * message to every subscription whose subject matches the subject it was *sent to*, but
 * JetStream sends a consumer's messages to an inbox while the MSG line names the stored
 * message's own subject. So a client subscription to `_INBOX.>` (or `>`) in the account
 * receives the gateway's pulls, KV watches and API replies under names it never asked
 * for, past the deny lists NATS applies to the subjects it checks. One rule for both
 * doors:
 *
 * - never a gateway-own subject: `$MQG.>` (its inboxes `$MQG.inbox.<id>.>`, liveness,
 *   retained writes) or `_INBOX.MQGW.>` (requests the gateway makes on a client's
 *   connection: stored-publish acks, `$SYS.REQ.USER.INFO`, AMQP queue pulls);
 * - never a core message whose reply is `$JS.ACK.>`: a JetStream delivery routed to
 *   somebody's inbox (stored delivery reaches a client only through the gateway's own
 *   consumer, checked by `storedDeliverable`);
 * - the subject must match the pattern the client subscribed to.
 */
import { subjectMatches } from "./subjects.js";

/** Reply subjects of the gateway's own connections (each account's gateway user, the single-account core). */
export const gatewayInboxPrefix = (gatewayId: string): string => `$MQG.inbox.${gatewayId}`;
/** Reply subjects of the gateway's requests on a client's own connection (client users may usually read `_INBOX.>`). */
export const clientInboxPrefix = (gatewayId: string): string => `_INBOX.MQGW.${gatewayId}`;

const MQG = "$MQG";
const CLIENT_INBOXES = "_INBOX.MQGW.";
const JS_ACK = "$JS.ACK.";

/** A subject only the gateway itself reads or writes. */
export function isGatewayOwn(subject: string): boolean {
  if (subject.startsWith(MQG)) return subject.length === MQG.length || subject.charCodeAt(MQG.length) === 0x2e;
  return subject.startsWith(CLIENT_INBOXES);
}

/**
 * A core NATS message that arrived on a client's subscription to `pattern`: may it go to
 * the client? `reply` is the message's reply subject, if any.
 */
export function coreDeliverable(pattern: string, subject: string, reply: string | undefined): boolean {
  if (reply?.startsWith(JS_ACK)) return false;
  if (isGatewayOwn(subject)) return false;
  return pattern === subject || subjectMatches(pattern, subject);
}

/**
 * The reply subject a client is shown (MQTT Response Topic, AMQP reply-to): not one of
 * the gateway's inboxes. A stored publish's core copy carries its JetStream ack inbox as
 * reply; a reader answering it would forge the stream's acknowledgement.
 */
export function clientReply(reply: string | undefined): string | undefined {
  return reply === undefined || isGatewayOwn(reply) ? undefined : reply;
}

/**
 * A message the gateway read for a client with its own user (a stored delivery from the
 * session's consumer, a retained message): its subject must match one of the subjects
 * the client's subscription maps to.
 */
export function storedDeliverable(patterns: readonly string[], subject: string): boolean {
  if (isGatewayOwn(subject)) return false;
  for (const p of patterns) if (p === subject || subjectMatches(p, subject)) return true;
  return false;
}
