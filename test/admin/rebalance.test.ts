// admin-subjects.md, rebalance: after one server of a two-server NATS cluster restarts,
// `rebalance` moves one account's client connections on a gateway back to it; the
// clients stay connected and a QoS 1 subscriber loses nothing while its connection moves.
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type ConnectedClient, collect, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { freePort } from "../helpers/ports.js";
import { type Reply, SECRETS, withSystemAccount } from "./world.js";

const ACCOUNTS = `
accounts {
  MQG_ADMIN {
    users: [
      { user: "mqg-admin", password: "${SECRETS.MQG_ADMIN_PASSWORD}" }
      { user: "mqg-operator", password: "${SECRETS.MQG_OPERATOR_PASSWORD}" }
    ]
  }
  PLANT_A { users: [ { user: "mqg-a", password: "${SECRETS.MQG_A_PASSWORD}" }, { user: "sensor-a", password: "sensor-a-pw" }, { user: "anon-a", password: "anon-a-pw" } ] }
}
`;

const serverConfig = (name: string, clusterPort: number, routes: number[]) =>
  withSystemAccount(`server_name: ${name}
cluster { name: C, listen: 127.0.0.1:${clusterPort}, routes: [${routes.map((p) => `nats-route://127.0.0.1:${p}`).join(", ")}] }
${ACCOUNTS}`);

describe("admin rebalance", () => {
  let n1: NatsServerHandle;
  let n2: NatsServerHandle;
  let gw: GatewayHandle;
  let operator: NatsConnection;
  const clients: ConnectedClient[] = [];
  let config2 = "";

  const start2 = async (port?: number) =>
    startNatsServer({ config: config2, jetstream: false, ...(port ? { port } : {}) });

  beforeAll(async () => {
    const [c1, c2] = [await freePort(), await freePort()];
    config2 = serverConfig("n2", c2, [c1]);
    n1 = await startNatsServer({ config: serverConfig("n1", c1, [c2]), jetstream: false });
    n2 = await start2();
    operator = await connect({ servers: n1.url, user: "mqg-operator", pass: SECRETS.MQG_OPERATOR_PASSWORD });
    gw = await startGateway({
      nats: `${n1.url},${n2.url}`,
      config: {
        admin: { user: "mqg-admin", password: "env:MQG_ADMIN_PASSWORD" },
        gateway_users: { PLANT_A: { user: "mqg-a", password: "env:MQG_A_PASSWORD" } },
      },
      env: { ...SECRETS },
    });
    await gw.waitForLog((l) => l.msg === "admin connection serving the admin subjects");
  }, 30_000);
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.endAsync().catch(() => undefined)));
    await operator?.close().catch(() => undefined);
    await gw?.stop();
    await Promise.all([n1?.stop(), n2?.stop()]);
  });

  const list = async () =>
    (
      await operator.request(`$MQG.admin.server.${gw.id}.list`, JSON.stringify({ account: "PLANT_A" }), {
        timeout: 2_000,
      })
    ).json<{
      clients: Array<{ client_id: string; nats_server: string }>;
    }>().clients;
  const rebalance = async (body: object) =>
    (
      await operator.request(`$MQG.admin.server.${gw.id}.rebalance`, JSON.stringify(body), { timeout: 2_000 })
    ).json<Reply>();

  it("moves the account's connections back to a restarted server; clients stay connected and a QoS 1 subscriber loses nothing", async () => {
    // Two credential sets: two shared NATS connections (sensor-a, and anonymous = anon-a).
    const sub = await connectMqtt(gw.port("mqtt"), {
      protocolVersion: 5,
      clientId: "rb-sub",
      username: "sensor-a",
      password: "sensor-a-pw",
    });
    const pub = await connectMqtt(gw.port("mqtt"), {
      protocolVersion: 5,
      clientId: "rb-pub",
      username: "sensor-a",
      password: "sensor-a-pw",
    });
    const other = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, clientId: "rb-anon" });
    clients.push(sub, pub, other);
    let closed = 0;
    for (const c of clients) c.on("close", () => closed++);
    await sub.subscribeAsync("rb/#", { qos: 1 });

    // Stop n2: every connection ends up on n1.
    const n2Port = n2.port;
    await n2.stop();
    await eventually(
      async () => ((await list()).every((c) => c.nats_server === "n1") ? true : undefined),
      10_000,
      "all on n1",
    );
    n2 = await start2(n2Port);
    // n2 is back (and routed) when a connection made there sees n1's subscriptions.
    const probe = await connect({ servers: n2.url, user: "sensor-a", pass: "sensor-a-pw" });
    await probe.close();

    // A stream of QoS 1 messages through the gateway while the connections move.
    const inbox = collect(sub);
    // A publish whose flush spans the switch gets PUBACK 0x80 (the gateway could not
    // confirm it); the publisher sends it again, as an MQTT client does with a refusal.
    let publishing = true;
    let sent = 0;
    const publisher = (async () => {
      while (publishing || sent < 20) {
        const n = sent + 1;
        try {
          await pub.publishAsync(`rb/${n}`, String(n), { qos: 1 });
          sent = n;
        } catch {
          // Refused while its connection moved: sent again, as an MQTT client does.
        }
      }
    })();

    expect(await rebalance({ account: "NOPE", server: "n2" })).toMatchObject({ started: false });
    const reply = await rebalance({ account: "PLANT_A", server: "n2", over: "500ms" });
    expect(reply).toEqual({ started: true, server: "n2", max: 2, over: "500ms" });
    await gw.waitForLog((l) => l.msg === "rebalance: done" || l.msg === "rebalance: stopped");
    expect(gw.logs.find((l) => l.msg === "rebalance: done")).toMatchObject({ moved: 2, missed: 0 });
    expect((await list()).map((c) => c.nats_server)).toEqual(["n2", "n2", "n2"]);
    publishing = false;
    await publisher;

    const seen = await eventually(
      () => (new Set(inbox.seen.map((s) => s.payload.toString())).size >= sent ? inbox.seen : undefined),
      10_000,
      "every acknowledged message",
    ).catch(() => inbox.seen);
    const got = new Set(seen.map((s) => s.payload.toString()));
    const missing = Array.from({ length: sent }, (_, i) => String(i + 1)).filter((p) => !got.has(p));
    expect(missing).toEqual([]);
    expect(closed).toBe(0);
    for (const c of clients) expect(c.connected).toBe(true);

    // Already there: nothing to do. A URL works as well as a name.
    expect(await rebalance({ account: "PLANT_A", server: `127.0.0.1:${n2.port}` })).toMatchObject({ started: false });
  }, 30_000);

  it("stops when the first connection does not land on the named server", async () => {
    const before = gw.logs.length;
    expect(await rebalance({ account: "PLANT_A", server: "no-such-server" })).toMatchObject({ started: true, max: 2 });
    const end = await gw.waitForLog(
      (l) => gw.logs.indexOf(l) >= before && (l.msg === "rebalance: stopped" || l.msg === "rebalance: done"),
    );
    expect(end).toMatchObject({ msg: "rebalance: stopped", moved: 0 });
    expect(String(end.reason)).toContain("did not land on no-such-server");
  }, 30_000);
});
