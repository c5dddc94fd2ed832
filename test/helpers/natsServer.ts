import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

let binary: string | undefined;

/** The nats-server the project's script finds or fetches (never a mock). */
export function natsServerBinary(): string {
  binary ??= execFileSync("bash", [join(import.meta.dirname, "../../scripts/nats-server.sh")], {
    encoding: "utf8",
  }).trim();
  return binary;
}

export interface NatsServerHandle {
  readonly url: string;
  readonly port: number;
  readonly storeDir: string;
  readonly process: ChildProcess;
  /** Rewrites the config file and has nats-server reload it (SIGHUP); resolves once it says so. */
  reload(config: string): Promise<void>;
  stop(): Promise<void>;
}

/** Starts a real nats-server on a free port (JetStream on unless told otherwise). */
export async function startNatsServer(
  options: { jetstream?: boolean; config?: string; port?: number; storeDir?: string } = {},
): Promise<NatsServerHandle> {
  const dir = mkdtempSync(join(tmpdir(), "mqgw-nats-"));
  const storeDir = options.storeDir ?? join(dir, "js");
  const args = ["-a", "127.0.0.1", "-p", String(options.port ?? -1)];
  if (options.jetstream !== false) args.push("-js", "-sd", storeDir);
  const file = join(dir, "server.conf");
  if (options.config) {
    writeFileSync(file, options.config);
    args.push("-c", file);
  }
  const proc = spawn(natsServerBinary(), args, { stdio: ["ignore", "ignore", "pipe"] });
  const port = await new Promise<number>((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`nats-server did not start: ${seen}`)), 15_000);
    proc.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
      seen += chunk;
      const m = /Listening for client connections on [^\s]+:(\d+)/.exec(seen);
      if (m && seen.includes("Server is ready")) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.once("exit", (code) => reject(new Error(`nats-server exited with ${code}: ${seen}`)));
  });
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    process: proc,
    reload: (config) =>
      new Promise<void>((resolve, reject) => {
        if (!options.config) return reject(new Error("nats-server was started without a config file"));
        writeFileSync(file, config);
        const timer = setTimeout(() => reject(new Error("nats-server did not reload")), 10_000);
        const onData = (chunk: string) => {
          if (!chunk.includes("Reloaded server configuration")) return;
          clearTimeout(timer);
          proc.stderr!.off("data", onData);
          resolve();
        };
        proc.stderr!.on("data", onData);
        proc.kill("SIGHUP");
      }),
    stop: () =>
      new Promise((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
        proc.once("exit", () => resolve());
        proc.kill("SIGTERM");
      }),
  };
}
