// Issue 14: what independent MQTT 5 clients check on the wire, on the embedded default
// (no NATS configured): Receive Maximum, the client's Maximum Packet Size, User Property
// order, server-to-client topic aliases and enhanced authentication.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { connect, type NatsConnection, headers as natsHeaders } from "@nats-io/transport-node";
import mqttPacket from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, metric, startEmbeddedGateway, subscribed } from "../helpers/gateway.js";
import { collect, connectMqtt } from "../helpers/mqttClient.js";
import { nextMsg } from "../helpers/natsMessages.js";
import { eventually } from "../helpers/poll.js";
import { runPython } from "../helpers/python.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const run = promisify(execFile);
const paho = (args: string[]) => runPython(join(import.meta.dirname, "clients", "paho_client.py"), args);
/** Command-line options written as one string. */
const options = (line: string) => line.split(" ");

let n = 0;
const unique = (prefix: string) => `${prefix}${process.pid}x${++n}`;

describe("MQTT 5 on the wire, third-party clients, embedded nats-server", () => {
  let gw: GatewayHandle & { natsUrl: string };
  let nc: NatsConnection;
  let port: number;

  beforeAll(async () => {
    gw = await startEmbeddedGateway();
    port = gw.port("mqtt");
    nc = await connect({ servers: gw.natsUrl });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
  });

  describe("Receive Maximum [MQTT-3.3.4-9]", () => {
    it("paho holding its PUBRELs: 256 QoS 2 publishes are answered PUBREC, one more gets DISCONNECT 0x93", async () => {
      const topic = unique("rm/hold");
      const c = paho([
        String(port),
        "--pub",
        topic,
        ...options("--qos 2 --count 256 --hold-pubrel --more 1 --seconds 15"),
      ]);
      expect(await c.line((l) => l.connack !== undefined)).toMatchObject({
        connack: 0,
        properties: { ReceiveMaximum: 256 },
      });
      const gone = await c.line((l) => l.disconnect !== undefined);
      expect(gone).toMatchObject({ disconnect: 0x93, properties: { ReasonString: "receive maximum exceeded" } });
      // Every PUBREC was in before the 257th went: the exchanges were open only for want of a PUBREL.
      expect(c.lines.filter((l) => l.pubrec !== undefined)).toHaveLength(256);
      c.kill();
    });

    it("a QoS 2 publish counts until its PUBREL: paho releasing 256, then sending 256 more, stays connected and NATS gets all 512", async () => {
      const topic = unique("rm/release");
      let got = 0;
      nc.subscribe(topic.replaceAll("/", "."), { callback: () => void got++ });
      await nc.flush();
      const c = paho([
        String(port),
        "--pub",
        topic,
        ...options("--qos 2 --count 256 --hold-pubrel --release-then 256 --seconds 30"),
      ]);
      await eventually(
        () => (c.lines.filter((l) => l.published !== undefined).length === 512 ? true : undefined),
        30_000,
        "512 PUBCOMPs",
      );
      expect(c.lines.some((l) => l.disconnect !== undefined)).toBe(false);
      await eventually(() => (got === 512 ? true : undefined), 10_000, "512 messages on NATS");
      c.kill();
    });
  });

  describe("the client's Maximum Packet Size, measured with topic and properties [MQTT-3.1.2-24]", () => {
    /** The size of the PUBLISH the gateway writes: mqtt-packet encodes it the same way for one User Property. */
    const sizeOf = (topic: string, payload: string, userProperties: Record<string, string>) =>
      mqttPacket.generate(
        {
          cmd: "publish",
          topic,
          payload: Buffer.from(payload),
          qos: 0,
          retain: false,
          dup: false,
          properties: { userProperties },
        },
        { protocolVersion: 5 },
      ).length;

    it("mqtt.js gets a message of exactly its maximum; one byte more in a User Property is dropped and counted in /metrics", async () => {
      const max = 300;
      const c = await connectMqtt(port, { protocolVersion: 5, properties: { maximumPacketSize: max } });
      const inbox = collect(c);
      const base = unique("mps/");
      await c.subscribeAsync(`${base}/+`, { qos: 0 });
      const topic = `${base}/t`;
      // The payload alone is far below the maximum: only the properties make the difference.
      let value = "";
      while (sizeOf(topic, "small", { k: value }) < max) value += "v";
      expect(sizeOf(topic, "small", { k: value })).toBe(max);
      const before = await metric(gw, "mqgw_dropped_total", { protocol: "mqtt", reason: "too_large_for_client" });
      const send = (v: string, payload: string) => {
        const h = natsHeaders();
        h.append("Mqgw-Prop-k", v);
        nc.publish(topic.replaceAll("/", "."), payload, { headers: h });
      };
      send(`${value}x`, "large");
      send(value, "small");
      const [m] = await inbox.count(1);
      expect(m!.payload.toString()).toBe("small");
      expect(m!.packet.properties?.userProperties).toEqual({ k: value });
      expect(await metric(gw, "mqgw_dropped_total", { protocol: "mqtt", reason: "too_large_for_client" })).toBe(
        before + 1,
      );
      await c.endAsync();
    });

    it("a QoS 1 message too large for the client counts as delivered: with Receive Maximum 1 the next one still comes [MQTT-3.1.2-25]", async () => {
      const c = await connectMqtt(port, {
        protocolVersion: 5,
        properties: { maximumPacketSize: 200, receiveMaximum: 1 },
      });
      const inbox = collect(c);
      const topic = unique("mps1/t");
      await c.subscribeAsync(topic, { qos: 1 });
      // Payload and topic alone are well within 200 bytes; its User Property is not.
      const big = natsHeaders();
      big.append("Mqgw-QoS", "1");
      big.append("Mqgw-Prop-k", "v".repeat(150));
      nc.publish(topic.replaceAll("/", "."), new Uint8Array(60), { headers: big });
      const h = natsHeaders();
      h.append("Mqgw-QoS", "1");
      nc.publish(topic.replaceAll("/", "."), "fits", { headers: h });
      const [m] = await inbox.count(1);
      expect(m!.payload.toString()).toBe("fits");
      expect(m!.packet.qos).toBe(1);
      await c.endAsync();
    });

    it("a refusal's reason string is left out when it would make the PUBACK larger than the client allows", async () => {
      // No client library shows a PUBACK's size or reason string: a raw client does.
      // 24 bytes: the CONNACK, with its properties, just fits.
      const c = await RawMqtt.connected(port, 5, { properties: { maximumPacketSize: 24 } });
      c.send({
        cmd: "publish",
        topic: "$MQG/admin/x",
        payload: Buffer.from("x"),
        qos: 1,
        messageId: 1,
        retain: false,
        dup: false,
      } as mqttPacket.Packet);
      const ack = (await c.next("puback")) as mqttPacket.IPubackPacket;
      expect(ack.reasonCode).toBe(0x87);
      expect(ack.properties?.reasonString).toBeUndefined();
      expect(ack.length).toBeLessThanOrEqual(24 - 2);
      c.end();
    });
  });

  describe("User Properties keep their order end to end (the header table)", () => {
    it("paho -> NATS -> paho: interleaved and integer-like keys, repeats, in order; Mqgw-Mqtt-Props-Order on the NATS message", async () => {
      const topic = unique("order/p");
      const props = ["b=1", "2=x", "b=3", "10=y", "a=4"];
      const sub = paho([String(port), "--sub", topic, "--expect", "1", "--seconds", "15"]);
      await sub.line((l) => l.subscribed !== undefined);
      const onNats = nextMsg(nc, topic.replaceAll("/", "."));
      const pub = paho([String(port), "--pub", topic, ...props.flatMap((p) => ["--prop", p]), "--seconds", "5"]);
      const m = await onNats;
      expect(m.headers?.get("Mqgw-Mqtt-Props-Order")).toBe("b,2,b,10,a");
      expect(m.headers?.values("Mqgw-Prop-b")).toEqual(["1", "3"]);
      const got = await sub.line((l) => l.message !== undefined);
      expect((got.message as { properties: { UserProperty: string[][] } }).properties.UserProperty).toEqual(
        props.map((p) => p.split("=")),
      );
      pub.kill();
      sub.kill();
    });

    it("mosquitto_pub with three different keys -> Mqgw-Mqtt-Props-Order; mosquitto_sub prints them in that order", async () => {
      const topic = unique("order/m");
      const at = ["-p", String(port), "-V", "mqttv5", "-t", topic];
      const sub = run("mosquitto_sub", [...at, "-i", "wire-order-sub", ...options("-C 1 -W 10 -F %P")]);
      const onNats = nextMsg(nc, topic.replaceAll("/", "."));
      const props = options(
        "-D publish user-property zone eu -D publish user-property 2 two -D publish user-property 1 one",
      );
      // mosquitto_sub says nothing once subscribed: the gateway's /clients does.
      await subscribed(gw, "wire-order-sub");
      await run("mosquitto_pub", [...at, "-m", "hi", ...props]);
      const m = await onNats;
      expect(m.headers?.get("Mqgw-Mqtt-Props-Order")).toBe("zone,2,1");
      expect((await sub).stdout.trim()).toBe("zone:eu 2:two 1:one");
    });
  });

  describe("server-to-client topic aliases", () => {
    const long = (s: string) => `fleet/${s}/vehicle-000042/telemetry/engine/temperature`;

    it("mqtt.js with Topic Alias Maximum 2 gets each topic right while aliases are bound, used and rebound (to a topic seen since the least recently used alias was)", async () => {
      const base = unique("ta");
      const c = await connectMqtt(port, { protocolVersion: 5, properties: { topicAliasMaximum: 2 } });
      const inbox = collect(c);
      const wire: Array<{ topic: string; alias: number | undefined }> = [];
      c.on("packetreceive", (p) => {
        if (p.cmd === "publish") wire.push({ topic: p.topic, alias: p.properties?.topicAlias });
      });
      await c.subscribeAsync(long(`${base}/+`).replace(/\/vehicle.*/, "/#"), { qos: 0 });
      const order = ["a", "a", "b", "a", "c", "b", "a", "c", "c", "b", "b"];
      for (const t of order) nc.publish(long(`${base}/${t}`).replaceAll("/", "."), t);
      const got = await inbox.count(order.length);
      expect(got.map((m) => m.topic)).toEqual(order.map((t) => long(`${base}/${t}`)));
      // a binds 1 and is then sent by alias alone; b binds 2. c, new while both are taken,
      // goes without one (a cycle of more topics than aliases would rebind on every send);
      // seen again after b's last use it takes b's 2, and b, seen again after a's, takes 1.
      const t = (x: string) => long(`${base}/${x}`);
      expect(wire).toEqual([
        { topic: t("a"), alias: 1 },
        { topic: "", alias: 1 },
        { topic: t("b"), alias: 2 },
        { topic: "", alias: 1 },
        { topic: t("c"), alias: undefined },
        { topic: "", alias: 2 },
        { topic: "", alias: 1 },
        { topic: t("c"), alias: undefined },
        { topic: t("c"), alias: 2 },
        { topic: t("b"), alias: undefined },
        { topic: t("b"), alias: 1 },
      ]);
      await c.endAsync();
    });

    it("paho with Topic Alias Maximum 10: the topic once, then the alias alone", async () => {
      const topic = long(unique("tp"));
      const c = paho([String(port), "--sub", topic, "--topic-alias-max", "10", "--expect", "3", "--seconds", "15"]);
      await c.line((l) => l.subscribed !== undefined);
      for (let i = 0; i < 3; i++) nc.publish(topic.replaceAll("/", "."), `m${i}`);
      await c.line((l) => l.done !== undefined);
      const msgs = c.lines
        .filter((l) => l.message)
        .map((l) => l.message as { topic: string; wire_topic: string; alias: number });
      expect(msgs.map((m) => m.topic)).toEqual([topic, topic, topic]);
      expect(msgs.map((m) => m.wire_topic)).toEqual([topic, "", ""]);
      expect(msgs.map((m) => m.alias)).toEqual([1, 1, 1]);
    });

    it("from 6 bytes on: a 5-byte topic goes without an alias, a 6-byte one (Paho's TopicA) gets one", async () => {
      const c = await connectMqtt(port, { protocolVersion: 5, properties: { topicAliasMaximum: 4 } });
      const wire: Array<{ topic: string; alias: number | undefined }> = [];
      c.on("packetreceive", (p) => {
        if (p.cmd === "publish") wire.push({ topic: p.topic, alias: p.properties?.topicAlias });
      });
      const inbox = collect(c);
      await c.subscribeAsync("w5/ab", { qos: 0 });
      await c.subscribeAsync("w6/abc", { qos: 0 });
      for (const subject of ["w5.ab", "w6.abc", "w5.ab", "w6.abc"]) nc.publish(subject, "x");
      expect((await inbox.count(4)).map((m) => m.topic)).toEqual(["w5/ab", "w6/abc", "w5/ab", "w6/abc"]);
      expect(wire).toEqual([
        { topic: "w5/ab", alias: undefined },
        { topic: "w6/abc", alias: 1 },
        { topic: "w5/ab", alias: undefined },
        { topic: "", alias: 1 },
      ]);
      await c.endAsync();
    });

    it("no aliases for a client that allows none (mqtt.js MQTT 5 by default, 3.1.1)", async () => {
      for (const protocolVersion of [5, 4] as const) {
        const c = await connectMqtt(port, { protocolVersion });
        const wire: string[] = [];
        c.on("packetreceive", (p) => {
          if (p.cmd === "publish") wire.push(p.topic);
        });
        const inbox = collect(c);
        const topic = long(unique("tn"));
        await c.subscribeAsync(topic, { qos: 0 });
        nc.publish(topic.replaceAll("/", "."), "1");
        nc.publish(topic.replaceAll("/", "."), "2");
        await inbox.count(2);
        expect(wire).toEqual([topic, topic]);
        await c.endAsync();
      }
    });
  });

  describe("enhanced authentication (MQTT 5 section 4.12)", () => {
    it("a CONNECT with an Authentication Method: CONNACK 0x8C for mqtt.js, paho and mosquitto_pub", async () => {
      const e = await connectMqtt(port, {
        protocolVersion: 5,
        properties: { authenticationMethod: "SCRAM-SHA-256" },
      }).then(
        () => undefined,
        (err: { code?: number }) => err,
      );
      expect(e?.code).toBe(0x8c);
      const c = paho([String(port), "--auth-method", "SCRAM-SHA-1", "--seconds", "5"]);
      expect(await c.line((l) => l.connack !== undefined)).toMatchObject({ connack: 0x8c });
      c.kill();
      const m = await run("mosquitto_pub", [
        "-p",
        String(port),
        "-V",
        "mqttv5",
        "-t",
        "x",
        "-m",
        "x",
        "-D",
        "connect",
        "authentication-method",
        "GS2-KRB5",
      ]).then(
        () => undefined,
        (err: { code?: number; stderr?: string }) => err,
      );
      expect(m?.stderr).toMatch(/Bad authentication method/);
    });

    it("an AUTH packet: DISCONNECT 0x82 with a reason string saying why (0x8C is a CONNACK code only)", async () => {
      // No client library sends AUTH unless the server started an exchange: a raw client does.
      for (const [properties, reason] of [
        [{ authenticationMethod: "SCRAM-SHA-1" }, /SCRAM-SHA-1.*supports no enhanced authentication/],
        [{}, /named no Authentication Method/],
      ] as const) {
        const c = await RawMqtt.connected(port, 5);
        c.send({ cmd: "auth", reasonCode: 0x19, properties } as mqttPacket.Packet);
        const d = (await c.next("disconnect")) as mqttPacket.IDisconnectPacket;
        expect(d.reasonCode).toBe(0x82);
        expect(d.properties?.reasonString).toMatch(reason);
        await c.waitClosed();
      }
    });
  });
});
