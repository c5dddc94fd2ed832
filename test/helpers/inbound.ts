import type mqtt from "mqtt-packet";
import { eventually } from "./poll.js";
import type { RawMqtt } from "./rawMqtt.js";

/**
 * Every PUBLISH a raw client receives, acknowledged as a client would (QoS 1 PUBACK,
 * QoS 2 PUBREC/PUBCOMP), leaving other packets for `next()`.
 */
export function publishesOf(c: RawMqtt) {
  const got: mqtt.IPublishPacket[] = [];
  const take = () => {
    for (
      let i = c.packets.findIndex((p) => p.cmd === "publish" || p.cmd === "pubrel");
      i >= 0;
      i = c.packets.findIndex((p) => p.cmd === "publish" || p.cmd === "pubrel")
    ) {
      const p = c.packets.splice(i, 1)[0]!;
      if (p.cmd === "pubrel") {
        c.send({ cmd: "pubcomp", messageId: p.messageId } as mqtt.Packet);
        continue;
      }
      const pub = p as mqtt.IPublishPacket;
      got.push(pub);
      if (pub.qos === 1) c.send({ cmd: "puback", messageId: pub.messageId } as mqtt.Packet);
      if (pub.qos === 2) c.send({ cmd: "pubrec", messageId: pub.messageId } as mqtt.Packet);
    }
  };
  c.socket.on("data", take);
  take();
  return {
    got,
    topics: () => got.map((p) => p.topic),
    payloads: () => got.map((p) => String(p.payload)),
    waitFor: (topic: string, ms = 10_000) =>
      eventually(() => got.find((p) => p.topic === topic), ms, `a PUBLISH on ${topic}`),
  };
}
