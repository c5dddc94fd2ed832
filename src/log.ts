import pino, { type Logger } from "pino";

export type { Logger };

/** One root logger; actors take children named after themselves so every line carries its id. */
export function createLogger(options: { level: string; format: "json" | "pretty" }): Logger {
  if (options.format === "pretty") {
    return pino({
      level: options.level,
      transport: { target: "pino-pretty", options: { colorize: false, destination: 2 } },
    });
  }
  // JSON to stderr: stdout stays free for commands that print results.
  return pino({ level: options.level }, pino.destination(2));
}
