import type { Packet } from "mqtt-packet";
import { Reason } from "../../protocol/mqttReasons.js";
import type { InboundPublisher } from "./inbound.js";
import type { OutboundFlow } from "./outbound.js";

/**
 * The client's half of the QoS 2 handshakes, one function per packet (aedes keeps a
 * handler per packet type): MQTT 5 answers an id it does not know with 0x92
 * (Packet Identifier not found); 3.1.1 has no reason codes.
 */

/** PUBREC for a QoS 2 delivery: the client has it; PUBREL. */
export function onPubrec(outbound: OutboundFlow, version: 4 | 5, messageId: number, write: (p: Packet) => void): void {
  const known = outbound.received(messageId);
  write({
    cmd: "pubrel",
    messageId,
    ...(known || version !== 5 ? {} : { reasonCode: Reason.packetIdNotFound }),
  } as Packet);
}

/** PUBREL for the client's QoS 2 publish: PUBCOMP once the session forgot the id (inbound.ts release). */
export function onPubrel(
  inbound: InboundPublisher,
  version: 4 | 5,
  messageId: number,
  write: (p: Packet) => void,
): void {
  void inbound.release(messageId).then((known) =>
    write({
      cmd: "pubcomp",
      messageId,
      ...(known || version !== 5 ? {} : { reasonCode: Reason.packetIdNotFound }),
    } as Packet),
  );
}
