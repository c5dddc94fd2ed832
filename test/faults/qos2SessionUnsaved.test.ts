// Issue 22, item 6: a QoS 2 publish of a persistent session is stored only once its
// Nats-Msg-Id is in the session record (docs/decisions/publish-identity.md). When the record
// cannot be written (here the sessions bucket's stream is gone), the publish is refused
// unstored: a copy stored without its id saved could not be known after a crash.

import { type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const persistent = (clientId: string, version: 4 | 5) =>
  version === 5 ? { clientId, clean: false, properties: { sessionExpiryInterval: 600 } } : { clientId, clean: false };

const publish = (topic: string, payload: string, messageId: number) =>
  ({
    cmd: "publish",
    topic,
    payload: Buffer.from(payload),
    qos: 2,
    messageId,
    retain: false,
    dup: false,
  }) as mqtt.Packet;

describe("QoS 2 publish whose session record cannot be written", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "UNSAVED", subjects: ["unsaved.>"] });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  async function stored(subject: string): Promise<string[]> {
    const info = await jsm.streams.info("UNSAVED", { subjects_filter: subject });
    const count = info.state.subjects?.[subject] ?? 0;
    if (count === 0) return [];
    const consumer = await jetstream(nc).consumers.get("UNSAVED", { filter_subjects: [subject] });
    const out: string[] = [];
    for await (const m of await consumer.fetch({ max_messages: count, expires: 2_000 })) {
      out.push(m.string());
      if (out.length === count) break;
    }
    return out;
  }

  // MQTT 5 has a negative PUBREC; 3.1.1 has none, so the connection closes.
  it.each([5, 4] as const)(
    "MQTT %s: refused, not stored, while the record cannot be written",
    async (version) => {
      const tag = `v${version}`;
      // A bucket of its own: the other row's gateway keeps a working one.
      const bucket = `UNSAVED_SESSIONS_${tag}`;
      const gw = await startGateway({
        nats: nats.url,
        config: { bindings: [{ stream: "UNSAVED" }], mqtt: { sessions_bucket: bucket } },
      });
      try {
        const c = await RawMqtt.connected(gw.port("mqtt"), version, persistent(`unsaved-${tag}`, version));
        const topic = `unsaved/${tag}`;
        // While the record is written, a QoS 2 publish is stored.
        c.send(publish(topic, "saved", 1));
        expect(((await c.next("pubrec", 10_000)) as mqtt.IPubrecPacket).reasonCode ?? 0).toBe(0);
        c.send({ cmd: "pubrel", messageId: 1 } as mqtt.Packet);
        expect(((await c.next("pubcomp", 10_000)) as mqtt.IPubcompPacket).reasonCode ?? 0).toBe(0);

        await jsm.streams.delete(`KV_${bucket}`);
        c.send(publish(topic, "unsaved", 2));
        if (version === 5) {
          const rec = (await c.next("pubrec", 10_000)) as mqtt.IPubrecPacket;
          expect(rec.reasonCode).toBe(0x80);
        } else {
          await c.waitClosed(10_000);
        }
        expect(await stored(`unsaved.${tag}`)).toEqual(["saved"]);
        c.end();
      } finally {
        await gw.stop();
      }
    },
    60_000,
  );
});
