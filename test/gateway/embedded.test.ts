import { execFileSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { natsServerBinary } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { freePort } from "../helpers/ports.js";

async function health(gw: GatewayHandle): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`http://127.0.0.1:${gw.port("http")}/healthz`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

function embeddedPid(gw: GatewayHandle): number | undefined {
  try {
    const out = execFileSync("pgrep", ["-P", String(gw.process.pid), "nats-server"], { encoding: "utf8" }).trim();
    return out ? Number(out.split("\n")[0]) : undefined;
  } catch {
    return undefined;
  }
}

describe("the gateway on its embedded nats-server", () => {
  let gw: GatewayHandle;

  beforeAll(async () => {
    const natsPort = await freePort();
    gw = await startGateway({
      config: { nats: { embedded_listen: `127.0.0.1:${natsPort}` } },
      env: { NATS_SERVER_BIN: natsServerBinary() },
    });
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it("answers /healthz 200 with the nats-server version running underneath", async () => {
    const h = await health(gw);
    expect(h.status).toBe(200);
    expect(h.body).toMatchObject({ status: "ok", id: gw.id, nats: "connected" });
    const version = (h.body.nats_server as { version: string }).version;
    expect(version).toMatch(/^2\.(1\d|[2-9]\d)\./);
    expect(execFileSync(natsServerBinary(), ["--version"], { encoding: "utf8" })).toContain(version);
  });

  it("goes 503 when the embedded nats-server dies, and 200 once it is restarted", async () => {
    const pid = embeddedPid(gw);
    expect(pid).toBeGreaterThan(0);
    process.kill(pid!, "SIGKILL");
    await eventually(async () => ((await health(gw)).status === 503 ? true : undefined), 10_000, "healthz 503");
    await eventually(async () => ((await health(gw)).status === 200 ? true : undefined), 20_000, "healthz 200 again");
    expect(embeddedPid(gw)).not.toBe(pid);
    const metrics = await (await fetch(`http://127.0.0.1:${gw.port("http")}/metrics`)).text();
    expect(metrics).toMatch(/^mqgw_embedded_nats_restarts_total 1$/m);
    expect(metrics).toMatch(/^mqgw_nats_reconnects_total [1-9]/m);
  });

  it("stops cleanly on SIGTERM: exit 0, and the embedded nats-server goes with it", async () => {
    const pid = embeddedPid(gw);
    const code = await gw.stop("SIGTERM");
    expect(code).toBe(0);
    expect(() => process.kill(pid!, 0)).toThrow();
  });
});

describe("start-up failures", () => {
  it("exits 2 when NATS cannot be reached", async () => {
    const port = await freePort();
    const err = await startGateway({ nats: `nats://127.0.0.1:${port}` }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/exited with 2/);
  });

  it("exits 2 when a listener cannot bind", async () => {
    const { createServer } = await import("node:net");
    const taken = createServer().listen(0, "127.0.0.1");
    await new Promise((r) => taken.once("listening", r));
    const port = (taken.address() as { port: number }).port;
    const natsPort = await freePort();
    const err = await startGateway({
      config: { mqtt: { listen: `127.0.0.1:${port}` }, nats: { embedded_listen: `127.0.0.1:${natsPort}` } },
      env: { NATS_SERVER_BIN: natsServerBinary() },
    }).then(
      () => undefined,
      (e: Error) => e,
    );
    taken.close();
    expect(err?.message).toMatch(/exited with 2/);
    expect(err?.message).toMatch(new RegExp(`mq-gateway: port ${port} \\(MQTT, 127\\.0\\.0\\.1:${port}\\) is in use`));
  });
});
