// `run --workers N` (docs/decisions/workers.md): how many gateway processes share the host.
/** More is a typo, not a host: each worker is a Node process of its own. */
export const MAX_WORKERS = 1024;

/**
 * The worker count a --workers value asks for: 1 (or no flag) is the one process of
 * before, 0 and `auto` one per core; anything else is refused with the reason.
 */
export function workerCount(
  value: string | undefined,
  cores: number,
): { ok: true; count: number } | { ok: false; error: string } {
  if (value === undefined) return { ok: true, count: 1 };
  const text = value.trim().toLowerCase();
  if (text === "auto") return { ok: true, count: Math.max(1, cores) };
  if (!/^\d+$/.test(text) || Number(text) > MAX_WORKERS)
    return { ok: false, error: `--workers: must be a whole number from 0 to ${MAX_WORKERS}, or auto (0 and auto: one per core); got ${JSON.stringify(value)}` };
  const n = Number(text);
  return { ok: true, count: n === 0 ? Math.max(1, cores) : n };
}
