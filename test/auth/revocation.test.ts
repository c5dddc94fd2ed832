// Issue 13, finding 7 (config reload): what happens to connected clients when their NATS
// user is removed or its permissions shrink (SIGHUP to nats-server). A removed user's
// MQTT clients get DISCONNECT 0x87 (3.1.1: a close) and its AMQP connections
// amqp:unauthorized-access, and their reconnects are answered without a storm of NATS
// logins. A subscription NATS stops serving is stopped in the gateway too, stored
// delivery (read with the gateway's own user) included.
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient, bodyText, collect } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { publishesOf } from "../helpers/inbound.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const users = (bob: string, withAlice: boolean) => `
authorization { users: [
  { user: gw, password: gw }
  { user: ops, password: ops }
  ${withAlice ? `{ user: alice, password: alice }` : ""}
  { user: bob, password: bob, permissions: ${bob} }
] }
`;
const BOB_BEFORE = `{ publish: ["orders.>", "$JS.API.>", "_INBOX.>"], subscribe: ["orders.>", "secret.>", "_INBOX.>"] }`;
const BOB_AFTER = `{ publish: ["$JS.API.>", "_INBOX.>"], subscribe: ["orders.>", "_INBOX.>"] }`;
const alice = (clientId: string, extra: Partial<mqtt.IConnectPacket> = {}) => ({
  clientId,
  username: "alice",
  password: Buffer.from("alice"),
  ...extra,
});
const bob = (clientId: string, extra: Partial<mqtt.IConnectPacket> = {}) => ({
  clientId,
  username: "bob",
  password: Buffer.from("bob"),
  ...extra,
});

describe("revocation by nats-server config reload", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let ops: NatsConnection;
  const serverLog: string[] = [];

  beforeAll(async () => {
    nats = await startNatsServer({ config: users(BOB_BEFORE, true) });
    nats.process.stderr!.on("data", (chunk: string) => serverLog.push(...chunk.split("\n")));
    ops = await connect({ servers: nats.url, user: "ops", pass: "ops" });
    await (await jetstreamManager(ops)).streams.add({ name: "SECRET", subjects: ["secret.>"] });
    gw = await startGateway({
      nats: nats.url,
      config: {
        gateway_users: { APP: { user: "gw", password: "gw" } },
        routing: [{ username: "*", account: "APP" }],
        bindings: [{ stream: "SECRET", account: "APP" }],
        log: { level: "info", format: "json" },
      },
    });
  });
  afterAll(async () => {
    await ops?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("permissions shrink: bob's QoS 1 stored subscription and his AMQP receiver stop at once; his publish is refused 0x87", async () => {
    const b = await RawMqtt.connected(
      gw.port("mqtt"),
      5,
      bob("bob-sub", { clean: false, properties: { sessionExpiryInterval: 300 } }),
    );
    const got = publishesOf(b);
    b.send({
      cmd: "subscribe",
      messageId: 1,
      subscriptions: [
        { topic: "secret/x", qos: 1 },
        { topic: "orders/x", qos: 0 },
      ],
    } as mqtt.Packet);
    expect(((await b.next("suback")) as mqtt.ISubackPacket).granted).toEqual([1, 0]);
    const amqp = await AmqpClient.open(gw.port("amqp"), { username: "bob", password: "bob" });
    const rx = await amqp.receiver({ source: { address: "secret.x" }, snd_settle_mode: 1 });
    const amqpGot = collect(rx);
    const js = jetstream(ops);
    const h = headers();
    h.set("Mqgw-QoS", "1");
    await js.publish("secret.x", "before", { headers: h });
    await got.waitFor("secret/x");
    expect(bodyText((await amqpGot.next()).message)).toBe("before");

    const detached = new Promise<{ condition?: string }>((resolve) =>
      rx.once("receiver_close", () => resolve(rx.error as { condition?: string })),
    );
    await nats.reload(users(BOB_AFTER, true));
    // NATS removed bob's secret.x subscriptions: the AMQP link goes, and stored delivery stops.
    expect(await detached).toMatchObject({ condition: "amqp:unauthorized-access" });
    await js.publish("secret.x", "after", { headers: h });
    ops.publish("orders.x", "marker");
    await got.waitFor("orders/x");
    expect(got.payloads()).toEqual(["before", "marker"]);
    b.send({
      cmd: "publish",
      topic: "orders/x",
      payload: Buffer.from("p"),
      qos: 1,
      messageId: 9,
      retain: false,
      dup: false,
    } as mqtt.Packet);
    expect(((await b.next("puback")) as mqtt.IPubackPacket).reasonCode).toBe(0x87);
    b.end();
    await amqp.close();
  });

  it("a removed user: MQTT 5 clients get 0x87, 3.1.1 ones a close, AMQP amqp:unauthorized-access; 20 reconnects cost NATS at most a few logins", async () => {
    const v5 = await Promise.all([1, 2, 3].map((i) => RawMqtt.connected(gw.port("mqtt"), 5, alice(`alice-5-${i}`))));
    const v4 = await RawMqtt.connected(gw.port("mqtt"), 4, alice("alice-4"));
    const amqp = await AmqpClient.open(gw.port("amqp"), { username: "alice", password: "alice" });
    const amqpClosed = amqp.closed(15_000);
    // bob stays (shrunk permissions do not end a connection).
    const survivor = await RawMqtt.connected(gw.port("mqtt"), 5, bob("bob-stays"));
    const before = serverLog.filter((l) => /authentication error/.test(l)).length;

    await nats.reload(users(BOB_AFTER, false));
    for (const c of v5) {
      expect(((await c.next("disconnect", 10_000)) as mqtt.IDisconnectPacket).reasonCode).toBe(0x87);
      await c.waitClosed();
    }
    await v4.waitClosed(10_000);
    expect(await amqpClosed).toMatchObject({ condition: "amqp:unauthorized-access" });

    // Every client comes straight back with the same login: refused, mostly without asking NATS.
    const answers = await Promise.all(
      Array.from({ length: 20 }, async (_x, i) => {
        const c = await RawMqtt.open(gw.port("mqtt"), 5);
        c.send({
          cmd: "connect",
          protocolId: "MQTT",
          protocolVersion: 5,
          clean: true,
          keepalive: 60,
          ...alice(`again-${i}`),
        } as mqtt.Packet);
        const ack = (await c.next("connack")) as mqtt.IConnackPacket;
        c.end();
        return ack.reasonCode;
      }),
    );
    for (const code of answers) expect([0x86, 0x87]).toContain(code);
    const logins = serverLog.filter((l) => /authentication error/.test(l)).length - before;
    expect(logins).toBeLessThanOrEqual(4);
    survivor.send({ cmd: "pingreq" } as mqtt.Packet);
    await survivor.next("pingresp");
    survivor.end();
  });
});
