// What an operator watches: a log line per client connect and close for both protocols,
// the /metrics families after real traffic, and GET /clients paged like nats-server's /connz.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient, collect as collectAmqp, send } from "../amqp/rheaClient.js";
import { type GatewayHandle, startEmbeddedGateway, startGateway } from "../helpers/gateway.js";
import { collect, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";

let nats: NatsServerHandle;
let gw: GatewayHandle;

beforeAll(async () => {
  nats = await startNatsServer();
  gw = await startGateway({ nats: nats.url });
});
afterAll(async () => {
  await gw?.stop();
  await nats?.stop();
});

const http = (path: string) => fetch(`http://127.0.0.1:${gw.port("http")}${path}`);
const metricsText = async () => (await http("/metrics")).text();

/** The value of one sample (`name{labels} value`), or undefined when it is not there. */
function sample(text: string, name: string, labels = ""): number | undefined {
  const line = text
    .split("\n")
    .find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ""} `) || (labels === "" && l.startsWith(`${name} `)));
  return line === undefined ? undefined : Number(line.split(" ").pop());
}

describe("client log lines", () => {
  it("one line at connect and one at close, for MQTT and AMQP, with cid, client id, account and remote", async () => {
    const mqttClient = await connectMqtt(gw.port("mqtt"), { clientId: "log-mqtt" });
    const connected = await gw.waitForLog((l) => l.msg === "MQTT client connected" && l.client_id === "log-mqtt");
    expect(connected).toMatchObject({
      cid: expect.any(Number),
      account: "$G",
      remote: expect.stringMatching(/^127\.0\.0\.1:\d+$/),
    });
    mqttClient.end();
    const closed = await gw.waitForLog((l) => l.msg === "MQTT connection closed" && l.client_id === "log-mqtt");
    expect(closed).toMatchObject({
      cid: connected.cid,
      remote: connected.remote,
      account: "$G",
      reason: expect.any(String),
    });

    const amqp = await AmqpClient.open(gw.port("amqp"), { container_id: "log-amqp" });
    const amqpConnected = await gw.waitForLog((l) => l.msg === "AMQP client connected" && l.client_id === "log-amqp");
    expect(amqpConnected).toMatchObject({
      cid: expect.any(Number),
      account: "$G",
      remote: expect.stringMatching(/^127\.0\.0\.1:\d+$/),
    });
    await amqp.close();
    const amqpClosed = await gw.waitForLog((l) => l.msg === "AMQP connection closed" && l.client_id === "log-amqp");
    expect(amqpClosed).toMatchObject({
      cid: amqpConnected.cid,
      remote: amqpConnected.remote,
      account: "$G",
      reason: expect.any(String),
    });
    expect(gw.logs.filter((l) => l.msg === "MQTT client connected" && l.client_id === "log-mqtt")).toHaveLength(1);
  });
});

describe("/metrics after traffic", () => {
  it("has bytes per protocol, sessions, subscriptions, links, reconnects, restarts, JetStream errors, build info and the process metrics", async () => {
    const sub = await connectMqtt(gw.port("mqtt"), { clientId: "m-sub" });
    const seen = collect(sub);
    await sub.subscribeAsync(["metrics/a", "metrics/b/#"], { qos: 1 });
    const pub = await connectMqtt(gw.port("mqtt"), { clientId: "m-pub" });
    await pub.publishAsync("metrics/a", Buffer.alloc(2000, 1), { qos: 1 });
    await seen.count(1);
    const amqp = await AmqpClient.open(gw.port("amqp"), { container_id: "m-amqp" });
    const receiver = await amqp.receiver("metrics.c");
    const got = collectAmqp(receiver);
    const sender = await amqp.sender("metrics.c");
    await send(sender, { body: "x".repeat(500) });
    await got.next();
    try {
      // A connection closed just before (the test above) may still be letting its session go.
      const text = await eventually(
        async () => {
          const t = await metricsText();
          return sample(t, "mqgw_sessions", 'protocol="mqtt"') === 2 ? t : undefined;
        },
        5_000,
        "two MQTT sessions",
      );
      for (const family of [
        "mqgw_connections",
        "mqgw_messages_in_total",
        "mqgw_messages_out_total",
        "mqgw_bytes_received_total",
        "mqgw_bytes_sent_total",
        "mqgw_sessions",
        "mqgw_subscriptions",
        "mqgw_amqp_links",
        "mqgw_nats_reconnects_total",
        "mqgw_embedded_nats_restarts_total",
        "mqgw_jetstream_errors_total",
        "mqgw_jetstream_ack_seconds",
        "mqgw_build_info",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "nodejs_eventloop_lag_seconds",
        "nodejs_heap_size_used_bytes",
      ])
        expect(text, family).toMatch(new RegExp(`^# TYPE ${family} `, "m"));
      expect(sample(text, "mqgw_bytes_received_total", 'protocol="mqtt"')).toBeGreaterThan(2000);
      expect(sample(text, "mqgw_bytes_sent_total", 'protocol="mqtt"')).toBeGreaterThan(2000);
      expect(sample(text, "mqgw_bytes_received_total", 'protocol="amqp"')).toBeGreaterThan(500);
      expect(sample(text, "mqgw_bytes_sent_total", 'protocol="amqp"')).toBeGreaterThan(500);
      expect(sample(text, "mqgw_sessions", 'protocol="mqtt"')).toBe(2);
      expect(sample(text, "mqgw_sessions", 'protocol="amqp"')).toBe(1);
      expect(sample(text, "mqgw_subscriptions", 'protocol="mqtt"')).toBe(2);
      expect(sample(text, "mqgw_subscriptions", 'protocol="amqp"')).toBe(1);
      expect(sample(text, "mqgw_amqp_links", 'role="sender"')).toBe(1);
      expect(sample(text, "mqgw_amqp_links", 'role="receiver"')).toBe(1);
      expect(text).toMatch(
        new RegExp(`^mqgw_build_info\\{version="[^"]+",node="${process.version}",id="${gw.id}"\\} 1$`, "m"),
      );
    } finally {
      sub.end(true);
      pub.end(true);
      await amqp.close();
    }
    // Closed sockets' bytes stay counted.
    const after = await metricsText();
    expect(sample(after, "mqgw_bytes_received_total", 'protocol="mqtt"')).toBeGreaterThan(2000);
  });

  it("counts NATS reconnects when nats-server comes back", async () => {
    const client = await connectMqtt(gw.port("mqtt"), { clientId: "m-reconnect" });
    try {
      const before = sample(await metricsText(), "mqgw_nats_reconnects_total") ?? 0;
      await nats.stop();
      nats = await startNatsServer({ port: nats.port, storeDir: nats.storeDir });
      await eventually(
        async () => ((sample(await metricsText(), "mqgw_nats_reconnects_total") ?? 0) > before ? true : undefined),
        15_000,
        "a reconnect counted",
      );
    } finally {
      client.end(true);
    }
  });
});

describe("GET /clients", () => {
  it("pages this gateway's clients like /connz: total, offset, limit, oldest first, with state and filters", async () => {
    const mqtt = await Promise.all(
      ["page-1", "page-2", "page-3"].map((clientId) => connectMqtt(gw.port("mqtt"), { clientId })),
    );
    const amqp = await AmqpClient.open(gw.port("amqp"), { container_id: "page-amqp" });
    try {
      await eventually(
        async () => ((await (await http("/clients")).json()) as { total: number }).total === 4 || undefined,
        5_000,
        "4 clients",
      );
      const first = (await (await http("/clients?limit=2")).json()) as Record<string, unknown> & {
        clients: Array<Record<string, unknown>>;
      };
      expect(first).toMatchObject({ id: gw.id, total: 4, offset: 0, limit: 2, count: 2 });
      expect(first.clients.map((c) => c.client_id)).toEqual(["page-1", "page-2"]);
      expect(first.clients[0]).toMatchObject({
        protocol: "mqtt",
        account: "$G",
        remote: expect.stringMatching(/^127\.0\.0\.1:\d+$/),
        since: expect.stringMatching(/Z$/),
        subscriptions: 0,
        held_bytes: 0,
        state: expect.stringMatching(/\bserving\b/),
        state_since: expect.stringMatching(/Z$/),
      });
      const rest = (await (await http("/clients?limit=2&offset=2")).json()) as {
        count: number;
        clients: Array<{ client_id: string }>;
      };
      expect(rest.clients.map((c) => c.client_id)).toEqual(["page-3", "page-amqp"]);
      const onlyAmqp = (await (await http("/clients?protocol=amqp")).json()) as {
        total: number;
        clients: Array<{ client_id: string }>;
      };
      expect(onlyAmqp.clients.map((c) => c.client_id)).toEqual(["page-amqp"]);
      const one = (await (await http("/clients?client_id=page-2")).json()) as { total: number };
      expect(one.total).toBe(1);
      const bad = await http("/clients?limit=0");
      expect(bad.status).toBe(400);
      expect(await bad.json()).toEqual({ error: "limit must be a whole number from 1 to 10000" });
    } finally {
      for (const c of mqtt) c.end(true);
      await amqp.close();
    }
  });
});

describe("/metrics of a fresh gateway", () => {
  it("the dashboard's drop, JetStream error and admin request counters are there at 0 before any event", async () => {
    const fresh = await startEmbeddedGateway();
    try {
      const text = await (await fetch(`http://127.0.0.1:${fresh.port("http")}/metrics`)).text();
      for (const protocol of ["mqtt", "amqp"]) {
        expect(sample(text, "mqgw_dropped_total", `protocol="${protocol}",reason="slow_consumer"`), protocol).toBe(0);
        expect(sample(text, "mqgw_jetstream_errors_total", `protocol="${protocol}",op="publish"`), protocol).toBe(0);
      }
      expect(sample(text, "mqgw_dropped_total", 'protocol="mqtt",reason="refused_qos0"')).toBe(0);
      expect(sample(text, "mqgw_dropped_total", 'protocol="amqp",reason="not_authorized"')).toBe(0);
      expect(sample(text, "mqgw_jetstream_errors_total", 'protocol="mqtt",op="kv"')).toBe(0);
      expect(sample(text, "mqgw_jetstream_errors_total", 'protocol="mqtt",op="consumer"')).toBe(0);
      for (const [op, scope] of [
        ["info", "ping"],
        ["list", "server"],
        ["kick", "server"],
        ["ldm", "server"],
      ]) {
        for (const outcome of ["ok", "error"])
          expect(
            sample(text, "mqgw_admin_requests_total", `op="${op}",scope="${scope}",outcome="${outcome}"`),
            `${op} ${scope} ${outcome}`,
          ).toBe(0);
      }
      // Zeros only: nothing happened, so no counter of these families is above 0.
      const values = text
        .split("\n")
        .filter((l) => /^mqgw_(dropped|jetstream_errors|admin_requests)_total\{/.test(l))
        .map((l) => Number(l.split(" ").pop()));
      expect(values.length).toBeGreaterThan(10);
      expect(values.filter((v) => v !== 0)).toEqual([]);
    } finally {
      await fresh.stop();
    }
  });
});
