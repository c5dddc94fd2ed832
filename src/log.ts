import pino, { type Logger } from "pino";

export type { Logger };

/** One root logger; actors take children named after themselves so every line carries its id. */
export function createLogger(options: { level: string; format: "json" | "pretty" }): Logger {
  if (options.format === "pretty") {
    return pino({
      level: options.level,
      // One line per event (fields as JSON after the message): a terminal shows what happened in order, not one event per screen.
      transport: {
        target: "pino-pretty",
        options: { colorize: false, destination: 2, singleLine: true, ignore: "hostname" },
      },
    });
  }
  // JSON to stderr: stdout stays free for commands that print results.
  return pino({ level: options.level }, pino.destination(2));
}
