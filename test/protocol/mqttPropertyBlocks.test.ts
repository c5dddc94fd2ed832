import fc from "fast-check";
import mqtt, { type Packet } from "mqtt-packet";
import { describe, expect, it } from "vitest";
import { propertiesProblem } from "../../src/protocol/mqttPropertyBlocks.js";

const str = fc.string({ maxLength: 12 });
const userProperties = fc.dictionary(
  fc.string({ minLength: 1, maxLength: 6 }),
  fc.oneof(str, fc.array(str, { minLength: 1, maxLength: 3 })),
  { maxKeys: 3 },
);
const publishProps = fc.record(
  {
    payloadFormatIndicator: fc.boolean(),
    messageExpiryInterval: fc.nat(),
    topicAlias: fc.integer({ min: 1, max: 65535 }),
    responseTopic: fc.string({ minLength: 1, maxLength: 8 }),
    correlationData: fc.uint8Array({ maxLength: 8 }).map((b) => Buffer.from(b)),
    userProperties,
    subscriptionIdentifier: fc.integer({ min: 1, max: 268435455 }),
    contentType: str,
  },
  { requiredKeys: [] },
);

const packets: fc.Arbitrary<Packet> = fc.oneof(
  fc
    .record({
      topic: fc.string({ minLength: 1, maxLength: 8 }),
      payload: fc.uint8Array({ maxLength: 20 }),
      qos: fc.constantFrom(0, 1, 2),
      properties: publishProps,
    })
    .map(
      (p) =>
        ({
          cmd: "publish",
          topic: p.topic,
          payload: Buffer.from(p.payload),
          qos: p.qos,
          retain: false,
          dup: false,
          messageId: p.qos ? 1 : undefined,
          properties: p.properties,
        }) as Packet,
    ),
  fc
    .record({ userProperties, reasonString: str }, { requiredKeys: [] })
    .map((properties) => ({ cmd: "puback", messageId: 3, reasonCode: 0x10, properties }) as Packet),
  fc
    .record({ userProperties, subscriptionIdentifier: fc.integer({ min: 1, max: 1000 }) }, { requiredKeys: [] })
    .map(
      (properties) =>
        ({ cmd: "subscribe", messageId: 2, subscriptions: [{ topic: "a/#", qos: 1 }], properties }) as Packet,
    ),
  fc
    .record({ userProperties }, { requiredKeys: [] })
    .map((properties) => ({ cmd: "unsubscribe", messageId: 2, unsubscriptions: ["a"], properties }) as Packet),
  fc
    .record({ sessionExpiryInterval: fc.nat(), reasonString: str, userProperties }, { requiredKeys: [] })
    .map((properties) => ({ cmd: "disconnect", reasonCode: 0, properties }) as Packet),
  fc
    .record({
      sessionExpiryInterval: fc.nat(),
      receiveMaximum: fc.integer({ min: 1, max: 65535 }),
      userProperties,
      will: fc.boolean(),
      willDelay: fc.nat(),
    })
    .map(
      (c) =>
        ({
          cmd: "connect",
          protocolId: "MQTT",
          protocolVersion: 5,
          clientId: "c",
          clean: true,
          keepalive: 10,
          properties: {
            sessionExpiryInterval: c.sessionExpiryInterval,
            receiveMaximum: c.receiveMaximum,
            userProperties: c.userProperties,
          },
          ...(c.will
            ? {
                will: {
                  topic: "w",
                  payload: Buffer.from("x"),
                  qos: 0,
                  retain: false,
                  properties: { willDelayInterval: c.willDelay, userProperties: c.userProperties },
                },
              }
            : {}),
        }) as Packet,
    ),
);

describe("MQTT 5 property blocks", () => {
  it("every packet mqtt-packet writes has well-formed property blocks", () => {
    fc.assert(
      fc.property(packets, (p) => {
        expect(propertiesProblem(mqtt.generate(p, { protocolVersion: 5 }), 5)).toBeUndefined();
      }),
      { numRuns: 2000 },
    );
  });

  it("a user property key running past its property block is malformed (the finding's packet)", () => {
    const topic = Buffer.from([0, 1, 0x74]);
    const props = Buffer.from([0x26, 0x00, 0x10, 0x61, 0x62]);
    const body = Buffer.concat([topic, Buffer.from([props.length]), props, Buffer.from("hello world payload here")]);
    const frame = Buffer.concat([Buffer.from([0x30, body.length]), body]);
    expect(propertiesProblem(frame, 5)).toContain("runs past its property block");
    expect(propertiesProblem(frame, 4)).toBeUndefined(); // 3.1.1 has no properties: it is payload
  });

  it("lengthening any string inside a property block past the block is always caught", () => {
    fc.assert(
      fc.property(publishProps, fc.integer({ min: 1, max: 200 }), (properties, extra) => {
        const frame = Buffer.from(
          mqtt.generate(
            {
              cmd: "publish",
              topic: "t",
              payload: Buffer.from("payload bytes"),
              qos: 0,
              retain: false,
              dup: false,
              properties: { ...properties, userProperties: { k: "v" } },
            } as Packet,
            { protocolVersion: 5 },
          ),
        );
        // The user property k=v: its key length sits right after the 0x26 identifier.
        const at = frame.indexOf(Buffer.from([0x26, 0x00, 0x01, 0x6b]));
        frame.writeUInt16BE(1 + extra + 13, at + 1);
        expect(propertiesProblem(frame, 5)).toBeDefined();
      }),
    );
  });

  it("never throws on arbitrary bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 2, maxLength: 64 }), fc.constantFrom(4, 5), (bytes, v) => {
        propertiesProblem(Buffer.from(bytes), v as 4 | 5);
      }),
      { numRuns: 5000 },
    );
  });
});
