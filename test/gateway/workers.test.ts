// `run --workers 2` on the embedded default, as real processes: two gateways behind one
// set of ports, one embedded nats-server, one HTTP port that speaks for both.
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { homeWorker } from "../../src/protocol/homeWorker.js";
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

/** `run --workers 2` on the embedded nats-server, with `config` besides. */
const startWorkerGroup = async (config: Record<string, unknown> = {}): Promise<GatewayHandle> => {
  const natsPort = await freePort();
  return startGateway({
    config: { nats: { embedded_listen: `127.0.0.1:${natsPort}` }, ...config },
    args: ["--workers", "2"],
    env: { NATS_SERVER_BIN: natsServerBinary() },
    ready: (l) => l.msg === "mq-gateway serving" && Array.isArray(l.workers),
  });
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
    gw = await startWorkerGroup();
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

  /** Connections the workers handed to another worker so far (docs/decisions/session-homes.md), both summed. */
  const handedOff = async (): Promise<number> => {
    const metrics = await (await get(gw, "/metrics")).text();
    let n = 0;
    for (const m of metrics.matchAll(/^mqgw_state_entries_total\{([^}]*)\} (\d+)/gm))
      if (m[1]!.includes('machine="mqttConnection"') && m[1]!.includes('state="handedOff"')) n += Number(m[2]);
    return n;
  };
  const absent = (clientId: string) =>
    eventually(
      async () => ((await workerOf(gw, clientId)) === undefined ? true : undefined),
      5_000,
      `${clientId} gone from /clients`,
    );

  it("serves each persistent session on its client id's home worker, whichever worker read its CONNECT", async () => {
    const before = await handedOff();
    // 3.1.1 clean session 0, and MQTT 5 starting clean with an expiry then resuming: both have a home.
    const ids = Array.from({ length: 12 }, (_, i) => ({ clientId: `home-${++unique}`, v5: i % 2 === 1 }));
    const connect = (clientId: string, v5: boolean, round: number) =>
      v5 ? { clientId, clean: round === 0, properties: { sessionExpiryInterval: 600 } } : { clientId, clean: false };
    for (const round of [0, 1]) {
      for (const { clientId, v5 } of ids) {
        const c = await RawMqtt.open(gw.port("mqtt"), v5 ? 5 : 4);
        c.send({
          cmd: "connect",
          protocolId: "MQTT",
          protocolVersion: v5 ? 5 : 4,
          keepalive: 60,
          ...connect(clientId, v5, round),
        } as mqtt.Packet);
        if (round === 0)
          c.send({
            cmd: "subscribe",
            messageId: 1,
            subscriptions: [{ topic: `workers/home/${clientId}`, qos: 1 }],
          } as mqtt.Packet);
        const ack = (await c.next("connack")) as mqtt.IConnackPacket;
        expect(ack.sessionPresent).toBe(round > 0);
        if (round === 0) await c.next("suback");
        expect(await eventually(() => workerOf(gw, clientId), 5_000, `${clientId} in /clients`)).toBe(
          `${gw.id}-${homeWorker(clientId, 2)}`,
        );
        // Dropped without DISCONNECT: the session waits on its home worker.
        c.end();
        await absent(clientId);
      }
    }
    const publisher = await connectMqtt(gw.port("mqtt"), { clientId: `home-pub-${++unique}` });
    opened.push(publisher);
    for (const { clientId } of ids)
      await publisher.publishAsync(`workers/home/${clientId}`, `for ${clientId}`, { qos: 1 });
    for (const { clientId, v5 } of ids) {
      const c = await RawMqtt.connected(gw.port("mqtt"), v5 ? 5 : 4, connect(clientId, v5, 2));
      const p = (await c.next("publish", 10_000)) as mqtt.IPublishPacket;
      expect(p.payload.toString()).toBe(`for ${clientId}`);
      c.send({ cmd: "puback", messageId: p.messageId } as mqtt.Packet);
      expect(await workerOf(gw, clientId)).toBe(`${gw.id}-${homeWorker(clientId, 2)}`);
      c.send({ cmd: "disconnect" } as mqtt.Packet);
      await c.waitClosed();
    }
    // 36 connections: that the kernel gave none of them to the other worker first is 2^-36.
    expect(await handedOff()).toBeGreaterThan(before);
  });

  it("moves what a client sent right behind its CONNECT with the socket: SUBSCRIBE and PUBLISH before the CONNACK", async () => {
    const before = await handedOff();
    const { client: watcher, inbox } = await connectCollecting(gw.port("mqtt"), {
      clientId: `early-watch-${++unique}`,
    });
    opened.push(watcher);
    await watcher.subscribeAsync("workers/early/#", { qos: 1 });
    const ids = Array.from({ length: 20 }, () => `early-${++unique}`);
    for (const [i, clientId] of ids.entries()) {
      const topic = `workers/early/${clientId}`;
      const c = await RawMqtt.open(gw.port("mqtt"), 4);
      const bytes = [
        { cmd: "connect", protocolId: "MQTT", protocolVersion: 4, clientId, clean: false, keepalive: 60 },
        { cmd: "subscribe", messageId: 1, subscriptions: [{ topic, qos: 1 }] },
        {
          cmd: "publish",
          topic,
          payload: Buffer.from(`echo ${clientId}`),
          qos: 1,
          messageId: 2,
          retain: false,
          dup: false,
        },
      ].map((p) => mqtt.generate(p as mqtt.Packet, { protocolVersion: 4 }));
      // One write, or three with 0-4 ms between them: the later packets then reach the socket
      // while the worker that read the CONNECT, or the primary, passes it on.
      const gapMs = [undefined, 0, 1, 2, 4][i % 5];
      if (gapMs === undefined) c.sendBytes(Buffer.concat(bytes));
      else
        for (const b of bytes) {
          c.sendBytes(b);
          await new Promise((r) => setTimeout(r, gapMs));
        }
      expect(((await c.next("connack")) as mqtt.IConnackPacket).returnCode).toBe(0);
      await c.next("suback");
      await c.next("puback");
      expect(await workerOf(gw, clientId)).toBe(`${gw.id}-${homeWorker(clientId, 2)}`);
      c.send({ cmd: "disconnect" } as mqtt.Packet);
      await c.waitClosed();
    }
    await inbox.count(ids.length);
    expect(inbox.seen.map((m) => m.payload.toString()).sort()).toEqual(ids.map((id) => `echo ${id}`).sort());
    expect(await handedOff()).toBeGreaterThan(before);
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
    // Meanwhile persistent sessions homed on either slot are served: those of the dead one
    // where they were read (the primary sends them back), until its successor serves, also
    // while it is forked and not yet listening.
    let served = 0;
    for (let i = 0; served < 6 || (await health(gw)).code !== 200; i++) {
      const c = await RawMqtt.connected(gw.port("mqtt"), 4, { clientId: `restart-home-${i}`, clean: false });
      c.send({ cmd: "disconnect" } as mqtt.Packet);
      await c.waitClosed();
      served++;
    }
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
    gw = await startWorkerGroup();
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

describe("session homes while a worker drains (run --workers 2)", () => {
  let gw: GatewayHandle;
  const opened: ConnectedClient[] = [];

  beforeAll(async () => {
    // Long enough that the drained worker still holds its clients while the test connects.
    gw = await startWorkerGroup({ ldm: { duration: "120s" } });
  });
  afterAll(async () => {
    for (const c of opened) c.end(true);
    await gw?.stop();
  });

  it("serves a session whose home worker is in lame duck mode on the worker that read its CONNECT", async () => {
    // Clean clients on worker 2, so that it drains them slowly instead of stopping at once.
    for (let i = 0; i < 200 && opened.length < 3; i++) {
      const clientId = `drain-hold-${i}`;
      const c = await connectMqtt(gw.port("mqtt"), { clientId, protocolVersion: 5 });
      if ((await eventually(() => workerOf(gw, clientId), 5_000, `${clientId} in /clients`)) === `${gw.id}-2`)
        opened.push(c);
      else c.end(true);
    }
    expect(opened).toHaveLength(3);
    const ldm = spawnSync(process.execPath, [bin, "ctl", "ldm", "--gateway", `${gw.id}-2`, "--data", gw.dataDir], {
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(ldm.status).toBe(0);
    await eventually(
      async () => ((await health(gw)).body.workers[1]?.status === "lame_duck" ? true : undefined),
      10_000,
      "worker 2 in lame duck mode",
    );
    // Sessions whose home is the draining worker: worker 1 reads them (the only one accepting),
    // worker 2 sends them back, and worker 1 serves them.
    const homedOn2 = Array.from({ length: 40 }, (_, i) => `drain-home-${i}`)
      .filter((id) => homeWorker(id, 2) === 2)
      .slice(0, 6);
    for (const clientId of homedOn2) {
      const c = await RawMqtt.connected(gw.port("mqtt"), 4, { clientId, clean: false });
      c.send({
        cmd: "subscribe",
        messageId: 1,
        subscriptions: [{ topic: `drain/${clientId}`, qos: 1 }],
      } as mqtt.Packet);
      await c.next("suback");
      expect(await workerOf(gw, clientId)).toBe(`${gw.id}-1`);
      c.send({ cmd: "disconnect" } as mqtt.Packet);
      await c.waitClosed();
    }
    // Worker 2 was still draining throughout: the sessions went back to worker 1, not to a stopped one.
    expect((await health(gw)).body.workers[1]?.status).toBe("lame_duck");
  });
});
