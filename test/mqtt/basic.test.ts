import { execFile, spawn } from "node:child_process";
import { promisify } from "node:util";
import { connect, type NatsConnection, headers as natsHeaders } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";

const run = promisify(execFile);

describe("MQTT <-> NATS through the gateway", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let port: number;

  beforeAll(async () => {
    nats = await startNatsServer();
    gw = await startGateway({ nats: nats.url });
    port = gw.port("mqtt");
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it.each([4, 5] as const)(
    "mqtt.js v%s: QoS 0/1/2 publishes reach a NATS subscriber on the mapped subject",
    async (protocolVersion) => {
      const sub = nc.subscribe(`plant${protocolVersion}.>`, { max: 3 });
      const got: string[] = [];
      const done = (async () => {
        for await (const m of sub) {
          got.push(`${m.subject}=${m.string()} qos=${m.headers?.get("Mqgw-QoS") || "0"}`);
          // By default every message names its publisher, QoS 0 without properties too.
          expect(m.headers?.get("Mqgw-Mqtt-Client-Id")).toMatch(/./);
        }
      })();
      await nc.flush();
      const client = await connectMqtt(port, { protocolVersion });
      await client.publishAsync(`plant${protocolVersion}/line1/temp`, "a", { qos: 0 });
      await client.publishAsync(`plant${protocolVersion}/line.2/temp`, "b", { qos: 1 });
      await client.publishAsync(`plant${protocolVersion}//x`, "c", { qos: 2 });
      await done;
      expect(got).toEqual([
        `plant${protocolVersion}.line1.temp=a qos=0`,
        `plant${protocolVersion}.line//2.temp=b qos=1`,
        `plant${protocolVersion}./.x=c qos=2`,
      ]);
      await client.endAsync();
    },
  );

  it("bare QoS 0 publishes, whose header block is made once per client, name it the same around publishes that say more", async () => {
    const sub = nc.subscribe("bare.>", { max: 4 });
    const got: Array<[string, string | undefined, string]> = [];
    const done = (async () => {
      for await (const m of sub)
        got.push([m.string(), m.headers?.get("Mqgw-Mqtt-Client-Id"), m.headers?.keys().join(",") ?? ""]);
    })();
    await nc.flush();
    const client = await connectMqtt(port, { protocolVersion: 5, clientId: "bäre 1%" });
    await client.publishAsync("bare/a", "1", { qos: 0 });
    await client.publishAsync("bare/a", "2", { qos: 0, properties: { contentType: "text/plain" } });
    await client.publishAsync("bare/b", "3", { qos: 0, retain: true });
    await client.publishAsync("bare/a", "4", { qos: 0 });
    await done;
    const id = "b%C3%A4re 1%25";
    expect(got).toEqual([
      ["1", id, "Mqgw-Mqtt-Client-Id"],
      ["2", id, "Mqgw-Content-Type,Mqgw-Mqtt-Client-Id"],
      ["3", id, "Mqgw-Mqtt-Retain,Mqgw-Mqtt-Client-Id"],
      ["4", id, "Mqgw-Mqtt-Client-Id"],
    ]);
    await client.endAsync();
  });

  it("a NATS publish reaches MQTT subscribers at QoS 0, with # matching the parent level too", async () => {
    const client = await connectMqtt(port, { protocolVersion: 5 });
    const inbox = collect(client);
    await client.subscribeAsync("hall/#", { qos: 1 });
    nc.publish("hall", "parent");
    nc.publish("hall.a.b", "child");
    const seen = await inbox.count(2);
    expect(seen.map((s) => [s.topic, s.payload.toString(), s.packet.qos])).toEqual([
      ["hall", "parent", 0],
      ["hall/a/b", "child", 0],
    ]);
    await client.endAsync();
  });

  it("MQTT 5 properties travel as Mqgw-* headers and come back as properties", async () => {
    const rx = await connectMqtt(port, { protocolVersion: 5 });
    const inbox = collect(rx);
    await rx.subscribeAsync("props/+", { qos: 1 });
    const natsSub = nc.subscribe("props.one", { max: 1 });
    const natsMsg = (async () => {
      for await (const m of natsSub) return m;
    })();
    await nc.flush();
    const tx = await connectMqtt(port, { protocolVersion: 5, clientId: "prop-sender" });
    await tx.publishAsync("props/one", "{}", {
      qos: 1,
      properties: {
        contentType: "application/json",
        correlationData: Buffer.from("req-7"),
        responseTopic: "replies/7",
        messageExpiryInterval: 60,
        payloadFormatIndicator: true,
        userProperties: { region: "eu", "with space": "x" },
      },
    });
    const m = (await natsMsg)!;
    expect(m.headers?.get("Mqgw-Content-Type")).toBe("application/json");
    expect(m.headers?.get("Mqgw-Reply-To")).toBe("replies.7");
    expect(m.headers?.get("Mqgw-Prop-region")).toBe("eu");
    expect(m.headers?.get("Mqgw-Prop-with%20space")).toBe("x");
    expect(m.headers?.get("Mqgw-Mqtt-Client-Id")).toBe("prop-sender");
    expect(m.headers?.get("Mqgw-QoS")).toBe("1");
    expect(m.reply).toBe("replies.7");
    const [got] = await inbox.count(1);
    const p = got!.packet.properties!;
    expect(p.contentType).toBe("application/json");
    expect(Buffer.from(p.correlationData!).toString()).toBe("req-7");
    expect(p.responseTopic).toBe("replies/7");
    expect(p.messageExpiryInterval).toBeGreaterThan(55);
    expect(p.userProperties).toEqual({ region: "eu", "with space": "x" });
    expect(got!.packet.qos).toBe(1);
    await tx.endAsync();
    await rx.endAsync();
  });

  it("a NATS message with headers reaches MQTT 5 with the matching properties", async () => {
    const rx = await connectMqtt(port, { protocolVersion: 5 });
    const inbox = collect(rx);
    await rx.subscribeAsync("orders/eu", { qos: 0 });
    const h = natsHeaders();
    h.set("Mqgw-Content-Type", "application/json");
    h.set("Mqgw-Prop-region", "eu");
    nc.publish("orders.eu", '{"id": 42}', { headers: h });
    const [got] = await inbox.count(1);
    expect(got!.payload.toString()).toBe('{"id": 42}');
    expect(got!.packet.properties?.contentType).toBe("application/json");
    expect(got!.packet.properties?.userProperties).toEqual({ region: "eu" });
    await rx.endAsync();
  });

  it("mosquitto_pub and mosquitto_sub (3.1.1 and 5) work against the gateway", async () => {
    for (const version of ["mqttv311", "mqttv5"]) {
      // -d prints the SUBACK it receives (line-buffered through stdbuf): publish once the subscription is in place.
      const sub = spawn("stdbuf", [
        "-oL",
        "mosquitto_sub",
        "-d",
        "-h",
        "127.0.0.1",
        "-p",
        String(port),
        "-V",
        version,
        "-t",
        `mosq/${version}/#`,
        "-C",
        "1",
        "-v",
        "-W",
        "10",
        "-q",
        "1",
      ]);
      let out = "";
      const subscribed = new Promise<void>((resolve) => {
        sub.stdout.setEncoding("utf8").on("data", (d: string) => {
          out += d;
          if (out.includes("SUBACK")) resolve();
        });
      });
      const exited = new Promise<number | null>((resolve) => sub.once("exit", resolve));
      await subscribed;
      await run("mosquitto_pub", [
        "-h",
        "127.0.0.1",
        "-p",
        String(port),
        "-V",
        version,
        "-t",
        `mosq/${version}/t`,
        "-m",
        "hello",
        "-q",
        "1",
      ]);
      expect(await exited).toBe(0);
      expect(out).toContain(`mosq/${version}/t hello`);
    }
  });

  it("shared subscriptions are NATS queue groups: each message goes to one member", async () => {
    const a = await connectMqtt(port, { protocolVersion: 5 });
    const b = await connectMqtt(port, { protocolVersion: 5 });
    const ia = collect(a);
    const ib = collect(b);
    await a.subscribeAsync("$share/g1/jobs/+", { qos: 0 });
    await b.subscribeAsync("$share/g1/jobs/+", { qos: 0 });
    for (let i = 0; i < 20; i++) nc.publish(`jobs.${i}`, String(i));
    await nc.flush();
    const deadline = Date.now() + 5_000;
    while (ia.seen.length + ib.seen.length < 20 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(ia.seen.length + ib.seen.length).toBe(20);
    await a.endAsync();
    await b.endAsync();
  });
});
