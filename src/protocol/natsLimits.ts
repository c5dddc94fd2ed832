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
