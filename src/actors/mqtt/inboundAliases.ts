import type { IPublishPacket } from "mqtt-packet";
import { Reason } from "../../protocol/mqttReasons.js";
import type { InboundPublish, PublishProperties } from "../../protocol/mqttToNats.js";

/**
 * The topic aliases a client set on its own PUBLISHes (MQTT 5 3.3.2.3.4): a PUBLISH with a
 * topic and an alias sets it, one with an empty topic uses it. Made on first use.
 */
export class InboundTopicAliases {
  private aliases: Map<number, string> | undefined;

  constructor(private readonly maximum: number) {}

  /** The PUBLISH's topic, or the protocol error it is ([MQTT-3.3.2-8], [MQTT-3.3.2-9]). */
  resolve(topic: string, alias: number): { topic: string } | { reasonCode: number; reason: string } {
    if (alias === 0 || alias > this.maximum)
      return { reasonCode: Reason.topicAliasInvalid, reason: `topic alias ${alias} out of range` };
    if (topic) {
      (this.aliases ??= new Map()).set(alias, topic);
      return { topic };
    }
    const known = this.aliases?.get(alias);
    return known ? { topic: known } : { reasonCode: Reason.protocolError, reason: `unknown topic alias ${alias}` };
  }
}

/** A PUBLISH as the inbound publisher takes it, its alias resolved by `aliases` (given when it carries one), or the protocol error. */
export function takenPublish(
  p: IPublishPacket,
  aliases: InboundTopicAliases | undefined,
): InboundPublish | { reasonCode: number; reason: string } {
  let topic = p.topic;
  // MQTT 5 3.3.2.1: an empty topic with no alias to stand for it is a Protocol Error (3.1.1 [MQTT-4.7.3-1]: closed).
  if (!aliases && topic === "")
    return { reasonCode: Reason.protocolError, reason: "PUBLISH with an empty topic and no topic alias" };
  if (aliases) {
    const resolved = aliases.resolve(topic, p.properties!.topicAlias!);
    if (!("topic" in resolved)) return resolved;
    topic = resolved.topic;
  }
  const payload = typeof p.payload === "string" ? Buffer.from(p.payload) : p.payload;
  return { topic, payload, qos: p.qos, retain: p.retain, properties: p.properties as PublishProperties | undefined };
}
