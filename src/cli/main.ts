// The mq-gateway command line (CONTRACT "Processes and commands"). main() returns the exit
// code instead of exiting, so bin/ sets it and tests can call main() directly.
// Exit codes: 0 ok, 1 bad config or usage; `run` passes on the gateway's own code (2: could not start).
// First: rhea and mqtt-packet must find the quiet `debug` when they load (vendor/debug.ts).
import "../vendor/quietDebug.js";
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { Command, CommanderError, Option } from "commander";
// Types only: the config modules (zod, yaml) load when a command needs them, so --help and --version stay quick.
import type { ConfigFlags, LoadResult } from "../config/load.js";
import { workerCount } from "./workerCount.js";

interface ConfigOptions extends ConfigFlags {
  readonly config?: string;
  readonly workers?: string;
}

export async function main(argv: string[]): Promise<number> {
  let code = 0;
  // Each action answers its exit code; commander only awaits it.
  const exitWith =
    <A extends unknown[]>(action: (...args: A) => Promise<number>) =>
    async (...args: A) => {
      code = await action(...args);
    };
  const program = new Command("mq-gateway")
    .description("MQTT 3.1.1/5 and AMQP 1.0 gateway onto NATS and JetStream")
    .exitOverride()
    .configureOutput({ writeOut: (s) => process.stdout.write(s), writeErr: (s) => process.stderr.write(s) })
    .showHelpAfterError("(mq-gateway --help for usage)")
    .version(version(), "-V, --version", "print the version");

  withConfigFlags(program.command("run", { isDefault: true }).description("run the gateway (the default command)"))
    .option("--workers <n>", "gateway processes sharing the ports: 1 (default) one process, 0 or auto one per core")
    .action(
      exitWith(async (options: ConfigOptions) => {
        const workers = workerCount(options.workers, availableParallelism());
        if (!workers.ok) return report([workers.error]);
        const loaded = await load(options);
        if (!loaded.ok) return report(loaded.problems);
        const { embeddedProblems } = await import("../gateway/embeddedAccounts.js");
        const unfit = embeddedProblems(loaded.config);
        if (unfit.length > 0) return report(unfit);
        // Imported here so check, generate and --help never load the runtime.
        const { workerRole, workerId, leaveCluster } = await import("../gateway/workerChannel.js");
        const role = workerRole();
        if (role) {
          // A worker forked by the primary below: the primary's id (a generated one too) with its number.
          const { runGateway } = await import("../gateway/run.js");
          const code = await runGateway({ ...loaded.config, id: workerId(role.primaryId, role.index) }, role);
          leaveCluster();
          return code;
        }
        if (workers.count > 1) {
          const { runPrimary } = await import("../gateway/primary.js");
          return runPrimary(loaded.config, workers.count);
        }
        const { runGateway } = await import("../gateway/run.js");
        return runGateway(loaded.config);
      }),
    );

  withConfigFlags(
    program
      .command("check")
      .description("validate a config file: prints ok, or every problem as path: message")
      .argument("[file]", "YAML or JSON config file (or --config)")
      .option("-c, --config <file>", "YAML or JSON config file"),
    false,
  ).action(
    exitWith(async (file: string | undefined, options: ConfigOptions) => {
      const config = options.config ?? file;
      if (config === undefined) return report(["check needs a config file: mq-gateway check FILE (or --config FILE)"]);
      if (options.config !== undefined && file !== undefined && file !== options.config)
        return report([`check takes one config file: got ${file} and --config ${options.config}`]);
      const loaded = await load({ ...options, config });
      if (!loaded.ok) return report(loaded.problems);
      process.stdout.write("ok\n");
      return 0;
    }),
  );

  program
    .command("generate")
    .description("print the NATS permissions that the gateway, operators and clients need")
    .addOption(new Option("--format <format>", "output format").choices(["nats-server"]).makeOptionMandatory())
    .option("-c, --config <file>", "YAML or JSON config file")
    .option("--id <id>", "gateway id (overrides the file)")
    .action(
      exitWith(async (options: ConfigOptions & { format: string }) => {
        const loaded = await load(options);
        if (!loaded.ok) return report(loaded.problems);
        const { natsServerPermissions } = await import("../config/permissions.js");
        process.stdout.write(natsServerPermissions(loaded.config));
        return 0;
      }),
    );

  const { addCtl } = await import("./ctl.js");
  addCtl(program, (c) => {
    code = c;
  });

  program
    .command("statecharts")
    .description("write each state machine's chart: an SVG laid out by ELK and a page with its Mermaid text")
    .option("--out <dir>", "where to write them", "docs/statecharts")
    .action(
      exitWith(async (options: { out: string }) => {
        const { writeStatecharts } = await import("../statecharts/write.js");
        for (const file of await writeStatecharts(options.out)) process.stdout.write(`${file}\n`);
        return 0;
      }),
    );

  // `run` is the default command and takes no arguments, so commander reads a misspelt
  // command (`mq-gateway chek x.yaml`) as run's arguments; it is named as what it is instead.
  const first = argv[0];
  const names = program.commands.map((c) => c.name());
  if (first !== undefined && !first.startsWith("-") && first !== "help" && !names.includes(first)) {
    return report([unknownCommand(first, names)]);
  }

  try {
    await program.parseAsync(argv, { from: "user" });
    return code;
  } catch (error) {
    // exitOverride turns help, --version and usage errors into throws; commander has printed them already.
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 1;
    throw error;
  }
}

function withConfigFlags(command: Command, withConfig = true): Command {
  if (withConfig) command.option("-c, --config <file>", "YAML or JSON config file (default: built-in defaults)");
  return command
    .option("--id <id>", "gateway id")
    .option("--nats <urls>", 'NATS server URL(s), comma-separated; "" starts the embedded nats-server')
    .option("--nats-listen <host:port>", "where the embedded nats-server listens (default: 127.0.0.1:4222)")
    .option("--mqtt <host:port>", 'MQTT listener; "" turns it off')
    .option("--amqp <host:port>", 'AMQP listener; "" turns it off')
    .option("--http <host:port>", 'HTTP listener (/healthz, /metrics); "" turns it off')
    .option("--data <dir>", "data directory of the embedded nats-server (default: ./data)")
    .option("--log-level <level>", "log level: trace, debug, info, warn, error, fatal or silent")
    .option(
      "--log-format <format>",
      "log format: json (one JSON object per line) or pretty (one readable line per event)",
    );
}

async function load(options: ConfigOptions): Promise<LoadResult> {
  const { loadConfig } = await import("../config/load.js");
  const { config, ...rest } = options;
  const flags: ConfigFlags = {};
  for (const key of ["id", "nats", "natsListen", "mqtt", "amqp", "http", "data", "logLevel", "logFormat"] as const) {
    if (rest[key] !== undefined) Object.assign(flags, { [key]: rest[key] });
  }
  return loadConfig({ file: config, flags });
}

function unknownCommand(given: string, names: readonly string[]): string {
  const near = names.filter((n) => editDistance(given.toLowerCase(), n) <= Math.max(1, Math.floor(n.length / 3)));
  const guess = near.length > 0 ? ` (did you mean ${near.join(" or ")}?)` : "";
  return `mq-gateway: unknown command '${given}'${guess}; the commands are ${names.join(", ")} (mq-gateway --help for usage)`;
}

function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++)
      next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

function report(problems: readonly string[]): number {
  for (const line of problems) process.stderr.write(`${line}\n`);
  return 1;
}

// From dist/cli/ (and src/cli/ under vitest) the package root is two levels up.
function version(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
      version?: string;
    };
    return pkg.version ?? "unknown";
  } catch {
    return "unknown";
  }
}
