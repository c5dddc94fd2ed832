import type { Packet } from "mqtt-packet";
import { parsePubackFast, parsePublishFast } from "../../protocol/mqttFastPath.js";
import { badPublishTopic, unsupportedConnectLevel } from "../../protocol/mqttFrame.js";
import { propertiesProblem } from "../../protocol/mqttPropertyBlocks.js";
import { type ParserSettings, parsePacket } from "../../vendor/mqttPacket.js";

/**
 * One whole MQTT frame as a packet, or why it is malformed. PUBLISH and PUBACK take the
 * fast path (docs/performance.md); anything it does not take goes to mqtt-packet.
 */
export function decodeFrame(frame: Buffer, version: 4 | 5, settings: ParserSettings): Packet | { malformed: string } {
  const fast = parsePublishFast(frame, version) ?? parsePubackFast(frame);
  if (fast) return fast as Packet;
  // [MQTT-3.1.2-2] an unknown protocol level is answered (CONNACK 0x01), not parsed.
  const level = unsupportedConnectLevel(frame);
  if (level !== undefined) return { cmd: "connect", protocolVersion: level } as Packet;
  const bad = badPublishTopic(frame) ?? propertiesProblem(frame, version);
  if (bad) return { malformed: bad };
  const parsed = parsePacket(frame, settings);
  return parsed instanceof Error ? { malformed: parsed.message } : parsed;
}
