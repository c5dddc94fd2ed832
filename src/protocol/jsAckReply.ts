/**
 * What a JetStream delivery's reply subject says of it. Two forms (nats-server
 * `jsAckPre` and ADR-15): the old
 *   $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<timestamp>.<pending>
 * and the new, with a domain and account hash, and a trailing random token:
 *   $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<timestamp>.<pending>[.<random>]
 */
export interface JsDelivery {
  readonly stream: string;
  readonly consumer: string;
  /** How many times this message has been delivered (1: the first time). */
  readonly delivered: number;
  readonly streamSeq: number;
}

export function parseJsAckReply(reply: string | undefined): JsDelivery | undefined {
  if (reply === undefined || !reply.startsWith("$JS.ACK.")) return undefined;
  const t = reply.split(".");
  // The old form has 9 tokens; the new one 11 or 12. Stream and consumer names hold no dots.
  const at = t.length === 9 ? 2 : t.length === 11 || t.length === 12 ? 4 : -1;
  if (at < 0) return undefined;
  const delivered = Number(t[at + 2]);
  const streamSeq = Number(t[at + 3]);
  if (!Number.isSafeInteger(delivered) || !Number.isSafeInteger(streamSeq) || delivered < 1 || streamSeq < 1)
    return undefined;
  return { stream: t[at]!, consumer: t[at + 1]!, delivered, streamSeq };
}
