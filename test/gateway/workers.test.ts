// `run --workers 2` on the embedded default, as real processes: two gateways behind one
// set of ports, one embedded nats-server, one HTTP port that speaks for both.
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../helpers/chromium.js";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type ConnectedClient, connectCollecting, connectMqtt } from "../helpers/mqttClient.js";
import { natsServerBinary } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { freePort } from "../helpers/ports.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const bin = new URL("../../bin/mq-gateway.js", import.meta.url).pathname;

interface Health {
  status: string;
  id: string;
  workers: Array<{ worker: number; id: string; status: string }>;
}

const get = async (gw: GatewayHandle, path: string) => fetch(`http://127.0.0.1:${gw.port("http")}${path}`);
const health = async (gw: GatewayHandle) => {
  const res = await get(gw, "/healthz");
  return { code: res.status, body: (await res.json()) as Health };
};
/** The worker gateway id that holds `clientId` now (from the primary's /clients). */
const workerOf = async (gw: GatewayHandle, clientId: string): Promise<string | undefined> => {
  const page = (await (await get(gw, `/clients?client_id=${encodeURIComponent(clientId)}`)).json()) as {
    clients: Array<{ gateway: string; state: string }>;
  };
  return page.clients[0]?.gateway;
};
/** Child processes of `pid` whose program is `name` (by argv[0]: Node 24 names its main thread "MainThread", so the process name will not do). */
const children = (pid: number, name: string): number[] => {
  const out = spawnSync("pgrep", ["-P", String(pid)], { encoding: "utf8" }).stdout.trim();
  const program = (child: number) => {
    try {
      return basename(readFileSync(`/proc/${child}/cmdline`, "utf8").split("\0")[0] ?? "");
    } catch {
      return "";
    }
  };
  return out
    ? out
        .split("\n")
        .map(Number)
        .filter((c) => program(c) === name)
    : [];
};
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("run --workers 2 on the embedded nats-server", () => {
  let gw: GatewayHandle;
  const opened: ConnectedClient[] = [];
  let unique = 0;
  /** MQTT connections, each kept open, until one lands on every worker: worker id -> a client id there. */
  const oneOnEach = async (prefix: string): Promise<Map<string, ConnectedClient & { clientId: string }>> => {
    const found = new Map<string, ConnectedClient & { clientId: string }>();
    for (let i = 0; i < 200 && found.size < 2; i++) {
      const clientId = `${prefix}-${++unique}`;
      const c = Object.assign(await connectMqtt(gw.port("mqtt"), { clientId, protocolVersion: 5 }), { clientId });
      opened.push(c);
      const at = await eventually(() => workerOf(gw, clientId), 5_000, `${clientId} in /clients`);
      if (!found.has(at)) found.set(at, c);
    }
    return found;
  };

  beforeAll(async () => {
    const natsPort = await freePort();
    gw = await startGateway({
      config: { nats: { embedded_listen: `127.0.0.1:${natsPort}` } },
      args: ["--workers", "2"],
      env: { NATS_SERVER_BIN: natsServerBinary() },
      ready: (l) => l.msg === "mq-gateway serving" && Array.isArray(l.workers),
    });
  });
  afterAll(async () => {
    for (const c of opened) c.end(true);
    await gw?.stop();
  });

  it("runs two workers, each a gateway with its own id, behind one /healthz and one /metrics", async () => {
    const h = await health(gw);
    expect(h.code).toBe(200);
    expect(h.body.status).toBe("ok");
    expect(h.body.workers.map((w) => [w.worker, w.id, w.status])).toEqual([
      [1, `${gw.id}-1`, "ok"],
      [2, `${gw.id}-2`, "ok"],
    ]);
    const metrics = await (await get(gw, "/metrics")).text();
    expect(metrics).toContain(
      `mqgw_build_info{version="0.1.0",node="${process.version}",id="${gw.id}-1",worker="1"} 1`,
    );
    expect(metrics).toContain(`id="${gw.id}-2",worker="2"} 1`);
    // One embedded nats-server, the primary's: the workers start none.
    expect(children(gw.process.pid!, "nats-server")).toHaveLength(1);
    for (const w of children(gw.process.pid!, "node")) expect(children(w, "nats-server")).toEqual([]);
  });

  it("answers the admin API as two gateways: ctl reaches each worker by its id", async () => {
    const { promisify } = await import("node:util");
    const { execFile } = await import("node:child_process");
    const run = promisify(execFile);
    const all = await run(process.execPath, [bin, "ctl", "info", "--data", gw.dataDir, "--json"]);
    expect((JSON.parse(all.stdout) as Array<{ id: string }>).map((g) => g.id).sort()).toEqual([
      `${gw.id}-1`,
      `${gw.id}-2`,
    ]);
    // Addressed to one worker: its own admin subject, which the embedded server lets it take.
    const one = await run(process.execPath, [
      bin,
      "ctl",
      "info",
      "--data",
      gw.dataDir,
      "--gateway",
      `${gw.id}-2`,
      "--json",
    ]);
    expect(JSON.parse(one.stdout)).toEqual([expect.objectContaining({ id: `${gw.id}-2` })]);
  });

  it("spreads MQTT clients over both workers, and a message published on one reaches a subscriber on the other", async () => {
    const on = await oneOnEach("spread");
    expect([...on.keys()].sort()).toEqual([`${gw.id}-1`, `${gw.id}-2`]);
    const { client: sub, inbox } = await connectCollecting(gw.port("mqtt"), { clientId: `sub-${++unique}` });
    opened.push(sub);
    await sub.subscribeAsync("workers/cross", { qos: 1 });
    const subAt = await eventually(() => workerOf(gw, sub.options.clientId!), 5_000, "subscriber in /clients");
    const other = [...on].find(([at]) => at !== subAt)![1];
    await other.publishAsync("workers/cross", "from the other worker", { qos: 1 });
    await inbox.count(1);
    expect(inbox.seen[0]!.payload.toString()).toBe("from the other worker");
    const metrics = await (await get(gw, "/metrics")).text();
    expect(metrics).toMatch(/^mqgw_connections\{protocol="mqtt",account="[^"]*",worker="1"\} [1-9]/m);
    expect(metrics).toMatch(/^mqgw_connections\{protocol="mqtt",account="[^"]*",worker="2"\} [1-9]/m);
  });

  it("keeps a persistent session's queued QoS 1 messages when the client comes back on the other worker", async () => {
    const clientId = `persistent-${++unique}`;
    const first = await RawMqtt.connected(gw.port("mqtt"), 4, { clientId, clean: false });
    first.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "workers/queued", qos: 1 }] } as mqtt.Packet);
    await first.next("suback");
    const home = await eventually(() => workerOf(gw, clientId), 5_000, "session in /clients");
    first.send({ cmd: "disconnect" } as mqtt.Packet);
    await first.waitClosed();
    await eventually(
      async () => ((await workerOf(gw, clientId)) === undefined ? true : undefined),
      5_000,
      "session saved",
    );

    const publisher = await connectMqtt(gw.port("mqtt"), { clientId: `queue-pub-${++unique}` });
    opened.push(publisher);
    for (const n of [1, 2, 3]) await publisher.publishAsync("workers/queued", `queued ${n}`, { qos: 1 });

    // Come back until the kernel hands the connection to the other worker. A return to the
    // same worker stays open and acks nothing, so the next one takes the live session over
    // from it: whatever it was sent comes again.
    const tries: RawMqtt[] = [];
    let back: RawMqtt | undefined;
    for (let i = 0; i < 100 && !back; i++) {
      const c = await RawMqtt.connected(gw.port("mqtt"), 4, { clientId, clean: false });
      tries.push(c);
      const at = await eventually(
        async () => {
          const w = await workerOf(gw, clientId);
          // The takeover ends the older connection; until then /clients may show both.
          return w !== undefined && (tries.length === 1 || tries[tries.length - 2]!.closed) ? w : undefined;
        },
        5_000,
        "returned session in /clients",
      );
      if (at !== home) back = c;
    }
    expect(back).toBeDefined();
    const payloads = new Set<string>();
    while (payloads.size < 3) {
      const p = (await back!.next("publish", 10_000)) as mqtt.IPublishPacket;
      payloads.add(p.payload.toString());
      back!.send({ cmd: "puback", messageId: p.messageId } as mqtt.Packet);
    }
    expect([...payloads].sort()).toEqual(["queued 1", "queued 2", "queued 3"]);
    for (const t of tries) t.end();
  });

  it("serves /statecharts: the page, and every worker's machines counted together on its stream", async () => {
    const on = await oneOnEach("charts");
    const page = await get(gw, "/statecharts");
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('<svg xmlns="http://www.w3.org/2000/svg" class="statechart" data-machine="mqttConnection"');
    expect((await get(gw, "/statecharts/page.js")).status).toBe(200);

    // The event stream: its counts hold both workers' connections (and the viewer, the primary's own actor).
    const ac = new AbortController();
    const stream = await fetch(`http://127.0.0.1:${gw.port("http")}/statecharts/events`, { signal: ac.signal });
    const reader = stream.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = "";
    const serving = async (): Promise<number> => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) throw new Error("the event stream ended");
        buffered += value;
        const events = buffered.split("\n\n");
        buffered = events.pop()!;
        for (const e of events) {
          const counts = /^event: counts\ndata: (.*)$/m.exec(e)?.[1];
          if (!counts) continue;
          const parsed = JSON.parse(counts) as Record<string, Record<string, number>>;
          const n = Object.entries(parsed.mqttConnection ?? {})
            .filter(([state]) => state.startsWith("session.serving"))
            .reduce((sum, [, k]) => sum + k, 0);
          if (n >= opened.length && (parsed.statechartsViewer?.streaming ?? 0) >= 1) return n;
        }
      }
    };
    try {
      // A connection after the stream opened: its transitions come through the primary, with new counts.
      const late = await connectMqtt(gw.port("mqtt"), { clientId: `charts-late-${++unique}` });
      opened.push(late);
      expect(await serving()).toBeGreaterThanOrEqual(3);
    } finally {
      ac.abort();
    }

    // Who is in a state: from both workers, each actor with its worker's id.
    const inState = (await (
      await get(gw, "/statecharts/state?machine=mqttConnection&state=session.serving")
    ).json()) as {
      total: number;
      actors: Array<{ id: string; gateway: string; client?: { client_id: string } }>;
    };
    expect(new Set(inState.actors.map((a) => a.gateway))).toEqual(new Set([`${gw.id}-1`, `${gw.id}-2`]));
    // One client's actors, found on whichever worker holds it, with its session.
    for (const [worker, client] of on) {
      const actor = (await (await get(gw, `/statecharts/actor?q=${encodeURIComponent(client.clientId)}`)).json()) as {
        gateway: string;
        machine: string;
        related: Array<{ machine: string }>;
      };
      expect(actor).toMatchObject({ gateway: worker, machine: "mqttConnection" });
      expect(actor.related.map((r) => r.machine)).toEqual(["mqttSession"]);
    }

    // In a browser: the summed count on the chart's tab, and a client's path from the other worker.
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      await page.goto(`http://127.0.0.1:${gw.port("http")}/statecharts`);
      await page.waitForFunction(
        (n) => Number(document.querySelector('[data-testid="total-mqttConnection"]')?.textContent) >= n,
        opened.length,
        { timeout: 30_000 },
      );
      for (const [worker, client] of on) {
        await page.locator('[data-testid="clients"] tbody tr', { hasText: client.clientId }).click();
        await page.waitForFunction(
          ([w, id]) =>
            [w!, id!].every((text) =>
              document.querySelector('[data-testid="path-summary"]')?.textContent?.includes(text),
            ),
          [worker, client.clientId] as const,
          { timeout: 30_000 },
        );
        expect(await page.getByTestId("path-state").textContent()).toMatch(/^session\.serving\./);
        expect(await page.locator("#chart-mqttConnection g.edge.on-path").count()).toBeGreaterThan(2);
      }
    } finally {
      await browser.dispose();
    }
  });

  it("restarts a worker that dies, under the same id", async () => {
    const before = children(gw.process.pid!, "node");
    expect(before).toHaveLength(2);
    const victim = before[0]!;
    process.kill(victim, "SIGKILL");
    await gw.waitForLog((l) => l.msg === "worker exited; restarting" && l.signal === "SIGKILL", 10_000);
    const after = await eventually(
      async () => {
        const h = await health(gw);
        const pids = children(gw.process.pid!, "node");
        return h.code === 200 && h.body.workers.length === 2 && pids.length === 2 && !pids.includes(victim)
          ? pids
          : undefined;
      },
      30_000,
      "two workers serving again",
    );
    expect(after).toContain(before[1]);
    expect((await health(gw)).body.workers.map((w) => w.id)).toEqual([`${gw.id}-1`, `${gw.id}-2`]);
  });

  it("stops on SIGTERM: every worker and the embedded nats-server go, exit 0", async () => {
    const pids = [...children(gw.process.pid!, "node"), ...children(gw.process.pid!, "nats-server")];
    expect(pids).toHaveLength(3);
    for (const c of opened.splice(0)) c.end(true);
    expect(await gw.stop("SIGTERM")).toBe(0);
    for (const pid of pids) expect(alive(pid)).toBe(false);
    expect(
      gw.logs
        .filter((l) => l.msg === "mq-gateway stopped")
        .map((l) => l.id)
        .sort(),
    ).toEqual([gw.id, `${gw.id}-1`, `${gw.id}-2`]);
  });
});

describe("run --workers values", () => {
  it("refuses a value that is not a count, exit 1 naming the flag", () => {
    const out = spawnSync(process.execPath, [bin, "run", "--workers", "two"], { encoding: "utf8" });
    expect(out.status).toBe(1);
    expect(out.stderr).toMatch(/^--workers: must be a whole number from 0 to 1024, or auto/m);
  });

  it("runs today's single process with --workers 1: no primary, no worker ids", async () => {
    const natsPort = await freePort();
    const gw = await startGateway({
      config: { nats: { embedded_listen: `127.0.0.1:${natsPort}` } },
      args: ["--workers", "1"],
      env: { NATS_SERVER_BIN: natsServerBinary() },
    });
    try {
      const h = (await (await get(gw, "/healthz")).json()) as Record<string, unknown>;
      expect(h.id).toBe(gw.id);
      expect(h.workers).toBeUndefined();
      expect(children(gw.process.pid!, "node")).toEqual([]);
      expect(
        execFileSync("pgrep", ["-P", String(gw.process.pid), "nats-server"], { encoding: "utf8" }).trim(),
      ).not.toBe("");
    } finally {
      expect(await gw.stop()).toBe(0);
    }
  });
});

describe("ctl ldm and rebalance under run --workers 2", () => {
  let gw: GatewayHandle;

  beforeAll(async () => {
    const natsPort = await freePort();
    gw = await startGateway({
      config: { nats: { embedded_listen: `127.0.0.1:${natsPort}` } },
      args: ["--workers", "2"],
      env: { NATS_SERVER_BIN: natsServerBinary() },
      ready: (l) => l.msg === "mq-gateway serving" && Array.isArray(l.workers),
    });
  });
  afterAll(async () => {
    await gw?.stop();
  });

  const ctl = (args: string[]) =>
    spawnSync(process.execPath, [bin, "ctl", ...args, "--data", gw.dataDir], { encoding: "utf8", timeout: 60_000 });

  it("info names the worker group; rebalance and ldm address the group, as SIGUSR2 to the primary does", async () => {
    const info = ctl(["info", "--json"]);
    expect(info.status).toBe(0);
    expect((JSON.parse(info.stdout) as Array<{ group: string }>).map((g) => g.group)).toEqual([gw.id, gw.id]);

    // Each worker moves its own connections (none here: there is nothing to move, and it says so).
    const rebalance = ctl(["rebalance", "--account", "$G", "--to", "nats-elsewhere", "--json"]);
    const replies = JSON.parse(rebalance.stdout) as Array<{ id: string }>;
    expect(replies.map((r) => r.id)).toEqual([`${gw.id}-1`, `${gw.id}-2`]);

    // A kick still needs one gateway: the group is not one.
    const kick = ctl(["kick", "--cid", "1"]);
    expect(kick.status).toBe(1);
    expect(kick.stderr).toMatch(/2 gateways answered .*say which with --gateway ID/);

    const ldm = ctl(["ldm"]);
    expect(ldm.stderr).toBe("");
    expect(ldm.stdout).toBe(
      `gateway ${gw.id}-1: lame duck mode started (it stops once its clients are gone)\n` +
        `gateway ${gw.id}-2: lame duck mode started (it stops once its clients are gone)\n`,
    );
    expect(ldm.status).toBe(0);
    // Both workers stop on their own, and with them the primary, exit 0.
    expect(await gw.stop("SIGCONT")).toBe(0);
  });
});
