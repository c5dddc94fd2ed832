import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { type AmqpTap, startAmqpTap } from "./amqpTap.js";
import { natsServerBinary } from "./natsServer.js";
import { freePort } from "./ports.js";

const bin = join(import.meta.dirname, "../../bin/mq-gateway.js");

export interface GatewayHandle {
  readonly process: ChildProcess;
  readonly listeners: Record<string, string>;
  readonly id: string;
  /** The config file it runs on (rewrite it and send SIGHUP to reload). */
  readonly file: string;
  /** The --data directory it runs with (the embedded nats-server's store, admin.yaml). */
  readonly dataDir: string;
  /** Every log line so far, parsed. */
  readonly logs: Array<Record<string, unknown>>;
  /** The strict reader in front of the AMQP listener (port("amqp") is its port); undefined with `amqpTap: false`. */
  readonly amqpTap: AmqpTap | undefined;
  /** A listener's port; "amqp" is the strict tap's, which passes every byte on (amqpTap.ts). */
  port(name: string): number;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  waitForLog(
    predicate: (line: Record<string, unknown>) => boolean,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>>;
}

/**
 * Runs the built gateway (`node bin/mq-gateway.js`) as a real process with listeners on
 * free ports, and resolves once it logs that it is serving.
 */
export async function startGateway(
  options: {
    nats?: string;
    config?: Record<string, unknown>;
    args?: string[];
    env?: NodeJS.ProcessEnv;
    /**
     * Every byte the gateway writes on its AMQP listener is read by a strict AMQP reader
     * (amqpTap.ts) on its way to the client, and stop() fails if one frame would have been
     * refused by a strict peer. False: clients reach the listener itself.
     */
    amqpTap?: boolean;
    /** The log line that says it serves (default: the first "mq-gateway serving"; `run --workers` logs one per worker, then the primary's). */
    ready?: (line: Record<string, unknown>) => boolean;
  } = {},
): Promise<GatewayHandle> {
  const dir = mkdtempSync(join(tmpdir(), "mqgw-gw-"));
  const file = join(dir, "gateway.yaml");
  const config = {
    mqtt: { listen: "127.0.0.1:0" },
    amqp: { listen: "127.0.0.1:0" },
    http: { listen: "127.0.0.1:0" },
    log: { level: "debug", format: "json" },
    ...options.config,
  };
  writeFileSync(file, stringify(config));
  const args = [
    bin,
    "run",
    "--config",
    file,
    "--data",
    join(dir, "data"),
    ...(options.nats ? ["--nats", options.nats] : []),
    ...(options.args ?? []),
  ];
  const proc = spawn(process.execPath, args, {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...options.env },
  });
  const logs: Array<Record<string, unknown>> = [];
  const waiters: Array<{
    predicate: (l: Record<string, unknown>) => boolean;
    resolve: (l: Record<string, unknown>) => void;
  }> = [];
  let stderrText = "";
  let rest = "";
  proc.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    stderrText += chunk;
    rest += chunk;
    const lines = rest.split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) {
      let parsed: Record<string, unknown>;
      try {
        parsed = JSON.parse(line);
      } catch {
        parsed = { msg: line };
      }
      logs.push(parsed);
      for (const w of [...waiters]) {
        if (w.predicate(parsed)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(parsed);
        }
      }
    }
  });
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));

  const waitForLog = (predicate: (l: Record<string, unknown>) => boolean, timeoutMs = 15_000) => {
    const found = logs.find(predicate);
    if (found) return Promise.resolve(found);
    return new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`log line not seen in ${timeoutMs} ms; stderr so far:\n${stderrText.slice(-4000)}`)),
        timeoutMs,
      );
      waiters.push({
        predicate,
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
      });
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`gateway exited with ${code} before the log line; stderr:\n${stderrText.slice(-4000)}`));
      });
    });
  };

  const serving = await waitForLog(options.ready ?? ((l) => l.msg === "mq-gateway serving"), 30_000);
  const listeners = serving.listeners as Record<string, string>;
  const listenerPort = (name: string) => Number(listeners[name]?.split(":").pop());
  const tap = options.amqpTap !== false && listeners.amqp ? await startAmqpTap(listenerPort("amqp")) : undefined;
  return {
    process: proc,
    listeners,
    id: String(serving.id),
    file,
    dataDir: join(dir, "data"),
    logs,
    amqpTap: tap,
    port: (name) => (name === "amqp" && tap ? tap.port : listenerPort(name)),
    waitForLog,
    stop: async (signal = "SIGTERM") => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const code = await exited;
      await tap?.close();
      if (tap && tap.violations.length > 0)
        throw new Error(`the gateway wrote AMQP frames a strict peer refuses:\n${tap.violations.join("\n")}`);
      return code;
    },
  };
}

/**
 * The gateway as a new user runs it: no `nats` given, so it starts its embedded
 * nats-server (on a free port here); `natsUrl` reaches that server.
 */
export async function startEmbeddedGateway(
  config: Record<string, unknown> = {},
): Promise<GatewayHandle & { natsUrl: string }> {
  const natsPort = await freePort();
  const nats = (config.nats as Record<string, unknown> | undefined) ?? {};
  const gw = await startGateway({
    config: { ...config, nats: { ...nats, embedded_listen: `127.0.0.1:${natsPort}` } },
    env: { NATS_SERVER_BIN: natsServerBinary() },
  });
  return Object.assign(gw, { natsUrl: `nats://127.0.0.1:${natsPort}` });
}

/** The sum of a /metrics counter over the series whose labels include `labels`. */
export async function metric(gw: GatewayHandle, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${gw.port("http")}/metrics`)).text();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`)) continue;
    if (want.every((w) => line.includes(w))) total += Number(line.split(" ").pop());
  }
  return total;
}

/**
 * Waits until the gateway has `clientId` connected with at least one subscription (its
 * /clients page): for clients such as mosquitto_sub that say nothing once subscribed.
 */
export async function subscribed(gw: GatewayHandle, clientId: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const page = (await (
      await fetch(`http://127.0.0.1:${gw.port("http")}/clients?client_id=${encodeURIComponent(clientId)}`)
    ).json()) as {
      clients: Array<{ subscriptions: number }>;
    };
    if (page.clients.some((c) => c.subscriptions > 0)) return;
    if (Date.now() > deadline) throw new Error(`${clientId} not subscribed in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
