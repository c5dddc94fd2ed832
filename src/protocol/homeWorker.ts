/**
 * `run --workers N`: the worker a persistent MQTT session lives on, from its client id
 * alone, so that every worker computes the same answer without asking anyone
 * (docs/decisions/session-homes.md). FNV-1a over the id's UTF-16 code units: cheap,
 * stable across processes and Node versions, and spread evenly enough over a few
 * hundred workers at most.
 */
export function homeWorker(clientId: string, workers: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < clientId.length; i++) {
    h ^= clientId.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return ((h >>> 0) % workers) + 1;
}

/** What of a CONNECT decides whether its session has a home worker. */
export interface HomeQuestion {
  readonly clientId: string;
  readonly cleanStart: boolean;
  readonly sessionExpirySec: number;
}

/**
 * Whether a connection's session can be found again later, and so should be served where
 * the next connection of its client id will be: one that resumes (Clean Start 0) or
 * outlives its connection (an expiry). A clean session that ends with its connection may
 * stay wherever the kernel put it; an empty client id gets one assigned, never seen again.
 */
export const hasHome = (q: HomeQuestion): boolean => q.clientId.length > 0 && (!q.cleanStart || q.sessionExpirySec > 0);
