/**
 * PUBACK, PUBREC, PUBREL and PUBCOMP in their shortest form. MQTT 5 lets a sender leave
 * out the reason code when it is 0 and there are no properties, and the property length
 * when there are none (3.4.2.1, 3.5.2.1, 3.6.2.1, 3.7.2.1); mosquitto, EMQX and HiveMQ
 * do, and some clients read only that form (Debian 12's paho-mqtt 1.6.1 unpacks a PUBREL
 * of more than two bytes as a packet id and dies). mqtt-packet always writes both, so
 * these four are encoded here; one carrying properties is left to mqtt-packet.
 */
export type AckCmd = "puback" | "pubrec" | "pubrel" | "pubcomp";

/** The first byte: the type, and PUBREL's fixed flags 0010 [MQTT-3.6.1-1]. */
const FIRST_BYTE: Record<AckCmd, number> = { puback: 0x40, pubrec: 0x50, pubrel: 0x62, pubcomp: 0x70 };

export function isAckCmd(cmd: string): cmd is AckCmd {
  return cmd === "puback" || cmd === "pubrec" || cmd === "pubrel" || cmd === "pubcomp";
}

/**
 * The packet without properties: remaining length 2 (packet id only) for 3.1.1 and for
 * MQTT 5 success; 3 (packet id, reason code) for another MQTT 5 reason. 3.1.1 has no
 * reason codes, so one given there is not written.
 */
export function encodeAck(version: 4 | 5, cmd: AckCmd, messageId: number, reasonCode = 0): Buffer {
  const first = FIRST_BYTE[cmd];
  const hi = (messageId >> 8) & 0xff;
  const lo = messageId & 0xff;
  if (version === 4 || reasonCode === 0) return Buffer.from([first, 2, hi, lo]);
  return Buffer.from([first, 3, hi, lo, reasonCode & 0xff]);
}

/** No properties to write: none given, or an empty set (what the session's answers carry). */
export function withoutProperties(properties: Record<string, unknown> | undefined): boolean {
  if (properties === undefined) return true;
  for (const k in properties) if (properties[k] !== undefined) return false;
  return true;
}
