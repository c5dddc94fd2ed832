import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import mqtt from "mqtt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { makeCertificates } from "../helpers/tls.js";

const run = promisify(execFile);

function connected(client: mqtt.MqttClient): Promise<mqtt.MqttClient> {
  return new Promise((resolve, reject) => {
    client.once("connect", () => resolve(client));
    client.once("error", reject);
  });
}

describe("MQTT listeners: TLS (with client certificates) and WebSocket on /mqtt", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  const certs = makeCertificates();

  beforeAll(async () => {
    nats = await startNatsServer();
    gw = await startGateway({
      nats: nats.url,
      config: {
        mqtt: {
          listen: "127.0.0.1:0",
          websocket: "127.0.0.1:0",
          tls: {
            listen: "127.0.0.1:0",
            cert_file: certs.cert,
            key_file: certs.key,
            ca_file: certs.ca,
            verify_clients: true,
          },
        },
      },
    });
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("mqtt.js over TLS with a client certificate publishes to NATS", async () => {
    const sub = nc.subscribe("secure.t", { max: 1 });
    await nc.flush();
    const client = await connected(
      mqtt.connect({
        protocol: "mqtts",
        host: "127.0.0.1",
        port: gw.port("mqtt_tls"),
        ca: readFileSync(certs.ca),
        cert: readFileSync(certs.clientCert),
        key: readFileSync(certs.clientKey),
        reconnectPeriod: 0,
      }),
    );
    await client.publishAsync("secure/t", "over tls", { qos: 1 });
    for await (const m of sub) expect(m.string()).toBe("over tls");
    await client.endAsync();
  });

  it("a TLS client without a certificate is refused when verify_clients is on", async () => {
    const client = mqtt.connect({
      protocol: "mqtts",
      host: "127.0.0.1",
      port: gw.port("mqtt_tls"),
      ca: readFileSync(certs.ca),
      reconnectPeriod: 0,
      connectTimeout: 3_000,
    });
    const outcome = await new Promise<string>((resolve) => {
      client.once("connect", () => resolve("connected"));
      client.once("error", () => resolve("refused"));
      client.once("close", () => resolve("refused"));
    });
    client.end(true);
    expect(outcome).toBe("refused");
  });

  it("mosquitto_pub over TLS with a client certificate", async () => {
    const sub = nc.subscribe("mosq.tls", { max: 1 });
    await nc.flush();
    await run("mosquitto_pub", [
      "-h",
      "127.0.0.1",
      "-p",
      String(gw.port("mqtt_tls")),
      "--cafile",
      certs.ca,
      "--cert",
      certs.clientCert,
      "--key",
      certs.clientKey,
      "-t",
      "mosq/tls",
      "-m",
      "m",
      "-q",
      "1",
    ]);
    for await (const m of sub) expect(m.string()).toBe("m");
  });

  it("a browser-style client over WebSocket (path /mqtt, subprotocol mqtt) subscribes and receives", async () => {
    const client = await connected(
      mqtt.connect(`ws://127.0.0.1:${gw.port("mqtt_ws")}/mqtt`, { protocolVersion: 5, reconnectPeriod: 0 }),
    );
    const inbox = collect(client);
    await client.subscribeAsync("ws/+", { qos: 1 });
    nc.publish("ws.in", "from nats");
    const [m] = await inbox.count(1);
    expect([m!.topic, m!.payload.toString()]).toEqual(["ws/in", "from nats"]);
    await client.endAsync();
  });
});
