// docs/grafana/mq-gateway.json, loaded two ways: against Grafana's own dashboard model (the
// `Dashboard` type of @grafana/schema, turned into a JSON schema by ts-json-schema-generator
// and checked with ajv), and against a running gateway's /metrics: every series a panel
// queries is one the gateway exposes after some traffic.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Ajv } from "ajv";
import { createGenerator } from "ts-json-schema-generator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmqpClient } from "../amqp/rheaClient.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { collect, connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";

const dashboard = JSON.parse(readFileSync(join(import.meta.dirname, "../../docs/grafana/mq-gateway.json"), "utf8")) as {
  panels: Array<{ type: string; title: string; targets?: Array<{ expr: string }>; gridPos: { x: number; w: number } }>;
};

function grafanaSchema(): object {
  const require = createRequire(import.meta.url);
  const types = join(
    dirname(require.resolve("@grafana/schema/package.json")),
    "dist/types/raw/dashboard/x/types.gen.d.ts",
  );
  return createGenerator({
    path: types,
    type: "Dashboard",
    skipTypeCheck: true,
    additionalProperties: false,
    expose: "export",
  }).createSchema("Dashboard");
}

describe("the Grafana dashboard", () => {
  const validate = new Ajv({ allErrors: true, strict: false }).compile(grafanaSchema());

  it("is a Grafana dashboard model (@grafana/schema's Dashboard)", () => {
    expect(validate(dashboard) ? [] : validate.errors).toEqual([]);
  });

  it("the check can fail: a panel with a misspelt key is refused", () => {
    const broken = structuredClone(dashboard) as { panels: Array<Record<string, unknown>> };
    broken.panels[1]!.gridPoss = broken.panels[1]!.gridPos;
    expect(validate(broken)).toBe(false);
  });

  it("every panel fits the 24-column grid", () => {
    for (const p of dashboard.panels) expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
  });
});

describe("the dashboard's queries against a gateway's /metrics", () => {
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

  it("queries only metric names the gateway exposes", async () => {
    const sub = await connectMqtt(gw.port("mqtt"), { clientId: "dash-sub" });
    const got = collect(sub);
    await sub.subscribeAsync("dash/#");
    await sub.publishAsync("dash/a", "1");
    await got.count(1);
    const amqp = await AmqpClient.open(gw.port("amqp"), { container_id: "dash-amqp" });
    const text = await (await fetch(`http://127.0.0.1:${gw.port("http")}/metrics`)).text();
    sub.end(true);
    await amqp.close();
    const exposed = new Set<string>();
    for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
      exposed.add(m[1]!);
      if (m[2] === "histogram") for (const s of ["_bucket", "_sum", "_count"]) exposed.add(`${m[1]}${s}`);
    }
    const queried = new Set(
      dashboard.panels.flatMap((p) =>
        (p.targets ?? []).flatMap((t) =>
          [...t.expr.matchAll(/\b((?:mqgw|process|nodejs)_[a-z0-9_]+)/g)].map((m) => m[1]!),
        ),
      ),
    );
    expect(queried.size).toBeGreaterThan(15);
    expect([...queried].filter((name) => !exposed.has(name))).toEqual([]);
  });
});
