/**
 * The `debug` package as rhea and mqtt-packet see it (docs/decisions/vendor-patches.md).
 * Both call their loggers on every frame and packet; a disabled `debug` logger still
 * gathers its arguments into an array and reads a getter per call (about 4 KB and a
 * tenth of the allocations of an MQTT CONNECT's parse, and a percent of an AMQP
 * message's CPU). When `DEBUG` is unset at start, the gateway's process loads a `debug`
 * whose loggers do nothing. With `DEBUG` set, the real one loads and logs as it would.
 * Must run before rhea or mqtt-packet is loaded (the first import of cli/main.ts).
 */
import { createRequire, Module } from "node:module";

const require = createRequire(import.meta.url);

/** The upstream code this stands in for (test/vendor.test.ts hashes its source). */
export const upstream: Readonly<Record<string, unknown>> = {
  // What rhea and mqtt-packet are given: `createDebug` and its loggers.
  "debug src/common.js setup": require("debug/src/common.js"),
};

interface QuietLogger {
  (...args: unknown[]): void;
  readonly enabled: false;
  readonly namespace: string;
  extend(sub: string): QuietLogger;
  log(...args: unknown[]): void;
  destroy(): boolean;
}

function quietLogger(namespace: string): QuietLogger {
  const logger = (() => {}) as unknown as QuietLogger;
  Object.assign(logger, {
    enabled: false,
    namespace,
    extend: (sub: string) => quietLogger(`${namespace}:${sub}`),
    log: () => {},
    destroy: () => false,
  });
  return logger;
}

/** What `require("debug")` gives: a logger factory with the package's module-level API, all of it inert. */
function quietFactory(): unknown {
  const factory = (namespace: string) => quietLogger(namespace);
  return Object.assign(factory, {
    enable: () => {},
    disable: () => "",
    enabled: () => false,
    coerce: (v: unknown) => v,
    formatters: {} as Record<string, unknown>,
    names: [] as unknown[],
    skips: [] as unknown[],
    log: () => {},
  });
}

/** The `debug` each library would load (each resolves its own: a nested copy is quieted too). */
const USERS = ["rhea", "mqtt-packet"];

export function quietDebugUnlessAsked(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.DEBUG) return false;
  for (const user of USERS) {
    let path: string;
    try {
      path = createRequire(require.resolve(user)).resolve("debug");
    } catch {
      // It no longer uses `debug`: nothing to quiet.
      continue;
    }
    if (require.cache[path]) continue;
    const m = new Module(path);
    m.filename = path;
    m.loaded = true;
    m.exports = quietFactory();
    require.cache[path] = m;
  }
  return true;
}
