import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { Data, Deferred, Effect, type Scope } from "effect";
import type { Logger } from "../log.js";
import { embeddedNatsMachine } from "../machines/embeddedNats.js";
import { startMachine } from "./machineActor.js";
import type { ActorRegistry } from "./registry.js";

export interface EmbeddedNatsOptions {
  readonly binary: string;
  readonly host: string;
  readonly port: number;
  readonly dataDir: string;
  /** Bytes in one message, headers included (nats.embedded_max_payload); the config file holds it. */
  readonly maxPayload: number;
  /**
   * Writes the nats-server config file for a store directory and returns its path
   * (src/gateway/embeddedAccounts.ts): listen address, store, max_payload and accounts.
   */
  readonly writeConfig: (storeDir: string, serverName: string) => Promise<string>;
  readonly log: Logger;
  readonly registry: ActorRegistry;
  /** Each time it exited and is being started again (metrics). */
  readonly onRestart?: () => void;
}

export interface EmbeddedNats {
  readonly url: string;
  /** Ends the child for good (the machine goes to `stopped`). */
  readonly stop: Effect.Effect<void>;
}

/**
 * nats-server exited before it was ready. Its last line is the only word on why; read
 * here, where that line is, so the start can say "port in use" without parsing a message.
 */
export class NatsServerRefused extends Data.TaggedError("NatsServerRefused")<{
  readonly message: string;
  readonly portInUse: boolean;
}> {}

/**
 * Runs nats-server as a child process, restarting it when it dies, until the scope
 * closes. Resolves once the first start answers, or fails when it cannot start at all.
 */
export const embeddedNats = (options: EmbeddedNatsOptions): Effect.Effect<EmbeddedNats, Error, Scope.Scope> =>
  Effect.gen(function* () {
    const { binary, host, port, log } = options;
    const storeDir = resolve(join(options.dataDir, "jetstream"));
    mkdirSync(storeDir, { recursive: true });
    const serverName = `mqgw-embedded-${port}`;
    const configFile = yield* Effect.tryPromise({
      try: () => options.writeConfig(storeDir, serverName),
      catch: (e) => new Error(`cannot write the nats-server config: ${(e as Error).message}`),
    });
    const firstReady = yield* Deferred.make<string, Error>();
    const stopped = yield* Deferred.make<void>();
    let child: ChildProcess | undefined;

    const actor = yield* startMachine(embeddedNatsMachine, {
      input: undefined,
      registry: options.registry,
      on: {
        spawn: () => {
          const proc = spawn(binary, ["-c", configFile], { stdio: ["ignore", "ignore", "pipe"] });
          child = proc;
          let seen = "";
          let version = "";
          proc.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
            seen += chunk;
            version ||= /Version:\s+(\S+)/.exec(seen)?.[1] ?? "";
            if (seen.includes("Server is ready")) {
              seen = "";
              actor.send({ type: "READY", version });
            } else if (seen.length > 64_000) seen = seen.slice(-8_000);
          });
          proc.on("error", (e) => {
            Deferred.doneUnsafe(
              firstReady,
              Effect.fail(new Error(`cannot start nats-server (${binary}): ${e.message}`)),
            );
          });
          proc.on("exit", (code, signal) => {
            if (child === proc) child = undefined;
            if (code !== 0 && signal === null && actor.getSnapshot().value === "starting") {
              // It refused to start (port taken, bad store): say why instead of looping.
              const line = lastLine(seen);
              Deferred.doneUnsafe(
                firstReady,
                Effect.fail(
                  new NatsServerRefused({
                    message: `nats-server exited with ${code}: ${line}`,
                    portInUse: /address already in use/i.test(line),
                  }),
                ),
              );
            }
            actor.send({ type: "EXITED", code, signal });
          });
        },
        kill: () => {
          if (child) child.kill("SIGTERM");
          else actor.send({ type: "EXITED", code: 0, signal: null });
        },
        ready: ({ version }) => {
          log.info(
            { version, url: `nats://${host}:${port}`, store: storeDir, max_payload: options.maxPayload },
            "embedded nats-server ready",
          );
          Deferred.doneUnsafe(firstReady, Effect.succeed(version));
        },
        down: ({ restartInMs }) => {
          options.onRestart?.();
          log.warn({ restartInMs }, "embedded nats-server exited; restarting");
        },
        stopped: () => Deferred.doneUnsafe(stopped, Effect.void),
      },
    });

    const stop = Effect.gen(function* () {
      actor.send({ type: "STOP" });
      yield* Deferred.await(stopped);
    });
    yield* Effect.addFinalizer(() =>
      stop.pipe(Effect.timeout("5 seconds"), Effect.ignore, Effect.ensuring(Effect.sync(() => child?.kill("SIGKILL")))),
    );
    yield* Deferred.await(firstReady);
    return { url: `nats://${host}:${port}`, stop };
  });

function lastLine(text: string): string {
  const lines = text.trim().split("\n");
  return lines[lines.length - 1] ?? "";
}
