import { loadConfig } from "../config/load.js";
import type { GatewayConfig } from "../config/schema.js";
import type { Logger } from "../log.js";

/**
 * What a reload may change while clients stay connected (CONTRACT, signals: routes,
 * bindings, limits and log level). Everything else binds sockets, names the gateway or
 * logs it in to NATS: like nats-server, a reload that changes any of it is refused as a
 * whole, naming each key, and the running config stays.
 */
const RELOADABLE = [
  "mqtt.routes",
  "mqtt.max_packet_size",
  "mqtt.receive_maximum",
  "mqtt.max_keepalive",
  "mqtt.session_expiry_max",
  // What the CONNACK tells clients (docs/decisions/mqtt-capabilities.md): read per connection.
  "mqtt.maximum_qos",
  "mqtt.retain_available",
  "mqtt.wildcard_subscription_available",
  "mqtt.shared_subscription_available",
  // The MQTT store's limits: applied to its stream at its next use (messageStore.ts).
  "mqtt.messages_max_bytes",
  "mqtt.messages_max_age",
  "amqp.routes",
  "amqp.max_frame_size",
  "amqp.dedupe_message_id",
  "bindings",
  "routing",
  "limits",
  "log.level",
] as const;

export type ReloadOutcome =
  | { readonly ok: true; readonly config: GatewayConfig; readonly changed: readonly string[] }
  | { readonly ok: false; readonly problems: readonly string[] };

/** Reads the config again from where it came (the same file, the same flags) and checks what changed. */
export async function reloadConfig(current: GatewayConfig): Promise<ReloadOutcome> {
  const loaded = await loadConfig({ file: current.source.file ?? undefined, flags: current.source.flags });
  if (!loaded.ok) return loaded;
  let next = loaded.config;
  // An id drawn at start stays: other gateways and operators know this process by it.
  if (current.source.id_generated && next.source.id_generated) next = { ...next, id: current.id };
  const changed = changedPaths(current, next);
  const needRestart = changed.filter((path) => !RELOADABLE.some((r) => path === r || path.startsWith(`${r}.`)));
  if (needRestart.length > 0)
    return { ok: false, problems: needRestart.map((path) => `${path}: changed, but applies only on a restart`) };
  return { ok: true, config: next, changed };
}

/** Dotted paths whose values differ, one level into each section. */
function changedPaths(a: GatewayConfig, b: GatewayConfig): string[] {
  const out: string[] = [];
  const keys = (x: object, y: object) => [...new Set([...Object.keys(x), ...Object.keys(y)])].sort();
  for (const key of keys(a, b)) {
    if (key === "source") continue;
    const va = (a as unknown as Record<string, unknown>)[key];
    const vb = (b as unknown as Record<string, unknown>)[key];
    if (same(va, vb)) continue;
    if (isSection(va) && isSection(vb)) {
      for (const inner of keys(va, vb)) if (!same(va[inner], vb[inner])) out.push(`${key}.${inner}`);
    } else out.push(key);
  }
  return out;
}

const same = (x: unknown, y: unknown) => JSON.stringify(x) === JSON.stringify(y);
const isSection = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * SIGHUP's actor: one reload at a time; signals that arrive meanwhile run one more reload
 * after it, so the last edit of the file always wins.
 */
export class Reloader {
  private running: Promise<void> | undefined;
  private again = false;

  constructor(
    private readonly current: () => GatewayConfig,
    private readonly apply: (next: GatewayConfig, changed: readonly string[]) => Promise<void>,
    private readonly log: Logger,
  ) {}

  request(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.loop().finally(() => {
      this.running = undefined;
    });
  }

  private async loop(): Promise<void> {
    do {
      this.again = false;
      await this.once().catch((e: Error) =>
        this.log.error({ err: e.message }, "config reload failed; the running config stays"),
      );
    } while (this.again);
  }

  private async once(): Promise<void> {
    const file = this.current().source.file;
    this.log.info({ file }, "reloading the config");
    const outcome = await reloadConfig(this.current());
    if (!outcome.ok) {
      this.log.error({ file, problems: outcome.problems }, "config reload refused; the running config stays");
      return;
    }
    await this.apply(outcome.config, outcome.changed);
    this.log.info({ file, changed: outcome.changed }, "config reloaded");
  }
}
