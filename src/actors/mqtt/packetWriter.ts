import type { IPublishPacket, Packet } from "mqtt-packet";
import { encodeAck, isAckCmd, withoutProperties } from "../../protocol/mqttAcks.js";
import { encodeMqttPacket } from "../../protocol/mqttEncode.js";
import { publishLength } from "../../protocol/mqttFastPath.js";
import { type PublishProperties, publishPropertiesLength } from "../../protocol/mqttProperties.js";
import { type AliasPlan, OutboundTopicAliases } from "../../protocol/topicAliasesOut.js";
import type { Outbox } from "./outbox.js";

/** The bytes a Topic Alias property adds to a PUBLISH's property block. */
const ALIAS_BYTES = 3;

/** What becomes of a packet the writer drops (the connection: counted in mqgw_dropped_total, logged). */
export interface PacketDrops {
  /** Dropped because the client would not take it (its Maximum Packet Size). */
  tooLarge(cmd: string): void;
  /** mqtt-packet could not encode it whole. */
  unencodable(cmd: string, why: string): void;
}

/**
 * Encodes every packet one MQTT connection sends into its outbox, within what the client
 * allows: no packet larger than its Maximum Packet Size [MQTT-3.1.2-24], measured on the
 * real encoding (topic, properties, alias), and its topics aliased when it allows that.
 */
export class PacketWriter {
  private version: 4 | 5 = 4;
  private maxPacket = Number.POSITIVE_INFINITY;
  private aliases: OutboundTopicAliases | undefined;

  constructor(
    private readonly outbox: Outbox,
    private readonly drops: PacketDrops,
  ) {}

  /** What the CONNECT said: the version, the client's Maximum Packet Size and Topic Alias Maximum. */
  configure(version: 4 | 5, clientMaxPacket = Number.POSITIVE_INFINITY, clientAliasMaximum = 0): void {
    this.version = version;
    this.maxPacket = version === 5 ? clientMaxPacket : Number.POSITIVE_INFINITY;
    this.aliases = version === 5 && clientAliasMaximum > 0 ? new OutboundTopicAliases(clientAliasMaximum) : undefined;
  }

  /** false: the packet is larger than the client allows and was not sent. */
  write(packet: Packet): boolean {
    if (packet.cmd === "publish") return this.publish(packet);
    const p = packet as { cmd: string; reasonCode?: number; properties?: Record<string, unknown>; messageId?: number };
    // Acknowledgements without properties in their shortest form (mqttAcks.ts): strict clients read only that.
    if (isAckCmd(p.cmd) && p.messageId !== undefined && withoutProperties(p.properties)) {
      this.outbox.bytes(encodeAck(this.version, p.cmd, p.messageId, p.reasonCode));
      return true;
    }
    let bytes = encodeMqttPacket(packet, this.version);
    if ((bytes instanceof Error || bytes.length > this.maxPacket) && p.properties) {
      // [MQTT-3.2.2-19, 3.4.2-2 ...] the Reason String and User Properties go first.
      const { reasonString: _r, userProperties: _u, ...rest } = p.properties;
      bytes = encodeMqttPacket({ ...packet, properties: rest } as Packet, this.version);
    }
    if (bytes instanceof Error) {
      // Whole or not at all: mqtt-packet's refusals and cut-short packets never reach the socket (mqttEncode.ts).
      this.drops.unencodable(p.cmd, bytes.message);
      return false;
    }
    if (bytes.length > this.maxPacket) {
      this.drops.tooLarge(p.cmd);
      return false;
    }
    this.outbox.bytes(bytes);
    return true;
  }

  /**
   * A PUBLISH, aliased when the client allows it. One the client would not take is dropped
   * [MQTT-3.1.2-25]; the caller treats it as delivered.
   */
  private publish(p: IPublishPacket): boolean {
    const version = this.version;
    const props = version === 5 ? (p.properties as PublishProperties | undefined) : undefined;
    const payload = typeof p.payload === "string" ? Buffer.from(p.payload) : p.payload;
    const topicBytes = Buffer.byteLength(p.topic, "utf8");
    const propsBytes = props ? publishPropertiesLength(props) : 0;
    const plan: AliasPlan | undefined = this.aliases?.plan(p.topic, topicBytes);
    if (plan) {
      const sentTopicBytes = plan.known ? 0 : topicBytes;
      const size = publishLength(version, sentTopicBytes, payload.byteLength, p.qos, propsBytes + ALIAS_BYTES);
      if (size <= this.maxPacket) {
        const aliased: PublishProperties = props ? { ...props, topicAlias: plan.alias } : { topicAlias: plan.alias };
        this.outbox.publish(
          size,
          version,
          plan.known ? "" : p.topic,
          sentTopicBytes,
          payload,
          p.qos,
          p.retain,
          p.dup,
          p.messageId,
          aliased,
          propsBytes + ALIAS_BYTES,
        );
        this.aliases!.commit(p.topic, plan);
        return true;
      }
      // A known alias only made it smaller. A new one made it 3 bytes larger: without it, it may fit.
      if (plan.known) {
        this.drops.tooLarge("publish");
        return false;
      }
    }
    const size = publishLength(version, topicBytes, payload.byteLength, p.qos, propsBytes);
    if (size > this.maxPacket) {
      this.drops.tooLarge("publish");
      return false;
    }
    this.outbox.publish(
      size,
      version,
      p.topic,
      topicBytes,
      payload,
      p.qos,
      p.retain,
      p.dup,
      p.messageId,
      props,
      propsBytes,
    );
    return true;
  }
}
