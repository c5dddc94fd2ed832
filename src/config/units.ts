// The text forms of config values: durations, sizes and listen addresses.
// Each parser answers a Result so the schema can report the message under the field's path.
import { err, ok, type Result } from "../protocol/result.js";

const DURATION_UNITS = [
  ["d", 86_400_000],
  ["h", 3_600_000],
  ["m", 60_000],
  ["s", 1_000],
  ["ms", 1],
] as const;
const DURATION_UNIT_NAMES = DURATION_UNITS.map(([unit]) => unit).join(", ");
// "ms" before "m", so "500ms" is not read as 500 minutes and a stray "s".
const DURATION_PART = /(\d+(?:\.\d+)?)(ms|d|h|m|s)/y;

/** "30s", "7d", "500ms", "1h30m" (largest unit first, each once) to milliseconds. */
export function parseDuration(input: unknown): Result<number> {
  if (typeof input === "number") {
    // A bare number is ambiguous (seconds? milliseconds?), except zero.
    return input === 0 ? ok(0) : err(`${input} has no unit; write e.g. "${input}s" (units: ${DURATION_UNIT_NAMES})`);
  }
  if (typeof input !== "string") return err(`expected a duration such as "30s", got ${describe(input)}`);
  const text = input.trim();
  if (text === "") return err(`expected a duration such as "30s", got an empty string`);
  if (text === "0") return ok(0);
  let total = 0;
  let lastRank = -1;
  DURATION_PART.lastIndex = 0;
  while (DURATION_PART.lastIndex < text.length) {
    const at = DURATION_PART.lastIndex;
    const match = DURATION_PART.exec(text);
    if (!match) {
      return err(
        `"${input}" is not a duration: unexpected "${text.slice(at)}" (write e.g. "30s", "1h30m"; units: ${DURATION_UNIT_NAMES})`,
      );
    }
    const unit = match[2] as (typeof DURATION_UNITS)[number][0];
    const rank = DURATION_UNITS.findIndex(([name]) => name === unit);
    if (rank <= lastRank)
      return err(`"${input}" is not a duration: write its units largest first, each once (e.g. "1h30m")`);
    lastRank = rank;
    total += Number(match[1]) * (DURATION_UNITS[rank]?.[1] ?? 1);
  }
  if (!Number.isSafeInteger(Math.round(total))) return err(`"${input}" is too long a duration`);
  if (Math.abs(total - Math.round(total)) > 1e-6) return err(`"${input}" is not a whole number of milliseconds`);
  return ok(Math.round(total));
}

/** The inverse of parseDuration: milliseconds to its shortest exact text, e.g. 5_400_000 -> "1h30m". */
export function formatDuration(ms: number): string {
  if (!Number.isSafeInteger(ms) || ms < 0) throw new RangeError(`not a duration in milliseconds: ${ms}`);
  if (ms === 0) return "0s";
  let rest = ms;
  let text = "";
  for (const [unit, size] of DURATION_UNITS) {
    const count = Math.floor(rest / size);
    if (count > 0) text += `${count}${unit}`;
    rest -= count * size;
  }
  return text;
}

// SI prefixes are powers of 1000 and IEC prefixes powers of 1024, as their standards say
// (nats-server reads "MB" as 1024^2; we follow the units' definitions and offer MiB for that).
const SIZE_UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
};
const SIZE_TEXT = /^(\d+(?:\.\d+)?) ?([A-Za-z]*)$/;

/** "1MiB", "64KiB", "1MB", "512" (bytes) to a number of bytes. Units are case-insensitive. */
export function parseSize(input: unknown): Result<number> {
  if (typeof input === "number") {
    return Number.isSafeInteger(input) && input >= 0
      ? ok(input)
      : err(`${input} is not a whole, non-negative number of bytes`);
  }
  if (typeof input !== "string") return err(`expected a size such as "1MiB", got ${describe(input)}`);
  const match = SIZE_TEXT.exec(input.trim());
  if (!match) return err(`"${input}" is not a size (write e.g. "512", "64KiB", "1MiB", "1MB")`);
  const unit = match[2] ?? "";
  const factor = SIZE_UNITS[unit.toLowerCase()];
  if (factor === undefined) {
    return err(`"${input}" has an unknown unit "${unit}" (use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)`);
  }
  const bytes = Number(match[1]) * factor;
  if (!Number.isSafeInteger(Math.round(bytes))) return err(`"${input}" is too large a size`);
  if (Math.abs(bytes - Math.round(bytes)) > 1e-6) return err(`"${input}" is not a whole number of bytes`);
  return ok(Math.round(bytes));
}

/** The inverse of parseSize: the largest binary unit that divides the size exactly, else plain bytes. */
export function formatSize(bytes: number): string {
  if (!Number.isSafeInteger(bytes) || bytes < 0) throw new RangeError(`not a size in bytes: ${bytes}`);
  for (const unit of ["TiB", "GiB", "MiB", "KiB"]) {
    const factor = SIZE_UNITS[unit.toLowerCase()] ?? 1;
    if (bytes > 0 && bytes % factor === 0) return `${bytes / factor}${unit}`;
  }
  return String(bytes);
}

/**
 * A rate, as EMQX writes its limiters: "100/s", "6000/1m", "1MiB/s", "1/10s"; a bare number
 * is per second. `amount` reads the part before the slash (a count, or a size for bytes).
 * Answers units per second; 0 (or "0") means no limit.
 */
export function parseRate(input: unknown, amount: (text: unknown) => Result<number>, example: string): Result<number> {
  if (typeof input === "number") {
    return Number.isFinite(input) && input >= 0 ? ok(input) : err(`${input} is not a rate (write e.g. "${example}")`);
  }
  if (typeof input !== "string") return err(`expected a rate such as "${example}", got ${describe(input)}`);
  const text = input.trim();
  if (text === "0") return ok(0);
  const slash = text.indexOf("/");
  if (slash < 0) return err(`"${input}" is not a rate: say per what (write e.g. "${example}")`);
  const n = amount(text.slice(0, slash).trim());
  if (!n.ok) return err(`"${input}" is not a rate: ${n.error}`);
  // "/s" is "/1s", as EMQX reads it.
  const per = text.slice(slash + 1).trim();
  const window = parseDuration(/^\d/.test(per) ? per : `1${per}`);
  if (!window.ok || window.value === 0)
    return err(`"${input}" is not a rate: "${per}" is not a duration such as "s", "1m"`);
  return ok((n.value * 1000) / window.value);
}

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

const LISTEN_TEXT = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]/]*)):(\d+)$/;

/** "HOST:PORT", "[::1]:PORT" or ":PORT" (all interfaces); "" means the listener is off (null). Port 0 picks a free port. */
export function parseListen(input: unknown): Result<ListenAddress | null> {
  if (typeof input !== "string") return err(`expected "HOST:PORT" (or "" to turn it off), got ${describe(input)}`);
  if (input === "") return ok(null);
  const match = LISTEN_TEXT.exec(input.trim());
  if (!match) return err(`"${input}" is not HOST:PORT (e.g. "0.0.0.0:1883", "[::]:1883", or "" to turn it off)`);
  const port = Number(match[3]);
  if (port > 65_535) return err(`"${input}": port ${port} is above 65535`);
  const host = match[1] ?? (match[2] === "" || match[2] === undefined ? "0.0.0.0" : match[2]);
  return ok({ host, port });
}

export function formatListen(address: ListenAddress | null): string {
  if (address === null) return "";
  return address.host.includes(":") ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
}

/** How a value looks in an error message: "a number (120)", "a list", ... */
export function describe(value: unknown): string {
  if (value === null || value === undefined) return "nothing";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "a mapping";
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  return `a ${typeof value} (${String(value)})`;
}
