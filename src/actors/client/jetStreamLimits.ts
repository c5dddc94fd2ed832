import { JetStreamApiError } from "@nats-io/jetstream";

/**
 * JetStream's limit errors, said as the limit that stands in the way and what lifts it: the
 * server's own text ("maximum consumers limit reached") names neither the stream nor the
 * setting, and a session that waits on one (it retries, nothing is lost) should tell the
 * operator what to change.
 */
const LIMITS: Record<number, (stream: string) => string> = {
  10026: (stream) =>
    `stream ${stream} has reached its max_consumers (nats-server 2.15 gives every stream 1,000 unless it sets its own): each persistent MQTT session reads one consumer per stored subscription, and each AMQP link on a stored address one; raise the stream's max_consumers, or fewer sessions must hold stored subscriptions`,
  10027: () => "the account has reached its JetStream max_streams: raise the account's limit",
  10023: () =>
    "JetStream has insufficient resources (its max_memory or max_file store is spoken for): raise the server's limits",
  10028: () => "the account has reached its JetStream max_memory: raise the account's limit",
  10047: () => "the account has reached its JetStream max_file (storage): raise the account's limit",
};

/** The limit `e` says was reached, as the operator should read it; undefined when `e` is not a limit error. */
export function limitReached(e: unknown, stream: string): string | undefined {
  if (!(e instanceof JetStreamApiError)) return undefined;
  return LIMITS[e.code]?.(stream);
}
