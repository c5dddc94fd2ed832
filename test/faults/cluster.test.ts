// Issue 8, item 1: a NATS cluster member goes away. The gateway's NATS connections move
// to the other node; its MQTT and AMQP clients stay connected and traffic flows again.
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient, bodyText, collect, send } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { freePort } from "../helpers/ports.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const nodeConfig = (name: string, routePort: number, peerRoutePort: number) => `
server_name: ${name}
cluster {
  name: mqgw-faults
  listen: 127.0.0.1:${routePort}
  routes: [ "nats-route://127.0.0.1:${peerRoutePort}" ]
}
`;

async function health(gw: GatewayHandle): Promise<{ status: number; server: string | null }> {
  const res = await fetch(`http://127.0.0.1:${gw.port("http")}/healthz`);
  const body = (await res.json()) as { nats_server: { name: string | null } };
  return { status: res.status, server: body.nats_server.name };
}

describe("a NATS cluster member goes away", () => {
  const nodes: Record<string, NatsServerHandle> = {};
  let gw: GatewayHandle;

  beforeAll(async () => {
    const [ra, rb] = [await freePort(), await freePort()];
    [nodes.A, nodes.B] = await Promise.all([
      startNatsServer({ jetstream: false, config: nodeConfig("A", ra, rb) }),
      startNatsServer({ jetstream: false, config: nodeConfig("B", rb, ra) }),
    ]);
    // The route is up when a message crosses it.
    const [a, b] = await Promise.all([connect({ servers: nodes.A!.url }), connect({ servers: nodes.B!.url })]);
    let crossed = false;
    b.subscribe("route.check", {
      callback: () => {
        crossed = true;
      },
    });
    await b.flush();
    await eventually(
      async () => {
        a.publish("route.check", "x");
        await a.flush();
        return crossed ? true : undefined;
      },
      10_000,
      "the cluster route",
    );
    await Promise.all([a.close(), b.close()]);
    gw = await startGateway({
      nats: `${nodes.A!.url},${nodes.B!.url}`,
      config: { log: { level: "info", format: "json" } },
    });
  });
  afterAll(async () => {
    await gw?.stop();
    await Promise.all(Object.values(nodes).map((n) => n.stop()));
  });

  it("the node the gateway uses stops: MQTT and AMQP clients stay connected and their traffic flows through the other node", async () => {
    const sub = await RawMqtt.connected(gw.port("mqtt"), 5, { clientId: "cluster-sub" });
    sub.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "cl/#", qos: 1 }] } as mqtt.Packet);
    await sub.next("suback");
    const pub = await RawMqtt.connected(gw.port("mqtt"), 4, { clientId: "cluster-pub" });
    const amqp = await AmqpClient.open(gw.port("amqp"), { container_id: "cluster-amqp" });
    const received = collect(await amqp.receiver("clamqp.x"));
    const sender = await amqp.sender("clamqp.x");

    const roundTrip = async (n: number) => {
      pub.send({
        cmd: "publish",
        topic: `cl/m${n}`,
        payload: Buffer.from(`m${n}`),
        qos: 1,
        messageId: n,
        retain: false,
        dup: false,
      } as mqtt.Packet);
      expect((await pub.next("puback", 10_000)).messageId).toBe(n);
      let p = (await sub.next("publish", 10_000)) as mqtt.IPublishPacket;
      // Extra copies of the probe below may still be arriving.
      while (p.topic === "cl/from/nats") p = (await sub.next("publish", 10_000)) as mqtt.IPublishPacket;
      expect(p.payload.toString()).toBe(`m${n}`);
      expect(await send(sender, { body: `a${n}` })).toEqual({ state: "accepted" });
      expect(bodyText((await received.next()).message)).toBe(`a${n}`);
    };
    await roundTrip(1);

    const before = await health(gw);
    expect(before.status).toBe(200);
    const gone = before.server!;
    const other = gone === "A" ? "B" : "A";
    await nodes[gone]!.stop();
    await eventually(
      async () => {
        const h = await health(gw);
        return h.status === 200 && h.server === other ? true : undefined;
      },
      15_000,
      `the gateway on node ${other}`,
    );

    // A NATS client on the surviving node reaches the MQTT subscriber: its subscription moved too.
    const nc: NatsConnection = await connect({ servers: nodes[other]!.url });
    await eventually(
      async () => {
        nc.publish("cl.from.nats", "moved");
        await nc.flush();
        const i = sub.packets.findIndex(
          (p) => p.cmd === "publish" && (p as mqtt.IPublishPacket).topic === "cl/from/nats",
        );
        return i >= 0 ? true : undefined;
      },
      10_000,
      "the MQTT subscription on the surviving node",
    );
    await roundTrip(2);
    expect(sub.closed || pub.closed).toBe(false);
    expect(amqp.conn.is_open()).toBe(true);
    await nc.close();
    sub.end();
    pub.end();
    await amqp.close();
  });
});

describe("a gateway given one seed of a cluster, whose node goes away", () => {
  const nodes: Record<string, NatsServerHandle> = {};
  let gw: GatewayHandle;

  beforeAll(async () => {
    const [ra, rb] = [await freePort(), await freePort()];
    [nodes.A, nodes.B] = await Promise.all([
      startNatsServer({ jetstream: false, config: nodeConfig("A", ra, rb) }),
      startNatsServer({ jetstream: false, config: nodeConfig("B", rb, ra) }),
    ]);
    gw = await startGateway({ nats: nodes.A!.url, config: { log: { level: "info", format: "json" } } });
    // The gateway's own connection learns B from the cluster's INFO once the route is up.
    await eventually(async () => ((await health(gw)).status === 200 ? true : undefined), 10_000, "the gateway on A");
  });
  afterAll(async () => {
    await gw?.stop();
    await Promise.all(Object.values(nodes).map((n) => n.stop()));
  });

  it("still takes new clients on new NATS connections: they dial the servers the cluster told it of", async () => {
    await eventually(
      async () => {
        const probe = await connect({ servers: nodes.A!.url });
        const learnt = probe.getServers().some((s) => s.port === nodes.B!.port);
        await probe.close();
        return learnt ? true : undefined;
      },
      10_000,
      "the cluster gossips B",
    );
    await nodes.A!.stop();
    await eventually(
      async () => ((await health(gw)).server === "B" ? true : undefined),
      15_000,
      "the gateway's own connection on B",
    );
    // Credentials no client used before: a NATS connection of its own, opened now.
    const fresh = await RawMqtt.connected(gw.port("mqtt"), 5, {
      clientId: "after-seed",
      username: "someone-new",
      password: Buffer.from("pw"),
    });
    fresh.send({ cmd: "pingreq" } as mqtt.Packet);
    await fresh.next("pingresp");
    fresh.socket.destroy();
  });
});
