// Shared by the fault tests (issue 8): metrics, the gateway's memory, and bounded waits.
import { readFileSync } from "node:fs";
import type { GatewayHandle } from "../helpers/gateway.js";

/** The sum of a Prometheus series over the lines carrying every label given. */
export async function metric(gw: GatewayHandle, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${gw.port("http")}/metrics`)).text();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  return text
    .split("\n")
    .filter((l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && want.every((w) => l.includes(w)))
    .reduce((sum, l) => sum + Number(l.split(" ").pop()), 0);
}

/** Resident memory of a process in bytes (Linux /proc). */
export function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = /VmRSS:\s+(\d+)\s+kB/.exec(status)?.[1];
  return Number(kb ?? 0) * 1024;
}

/** Resolves with `value` once the promise settles, or with `timedOut` after `ms`: a bound on "not hung". */
export function within<T, U>(p: Promise<T>, ms: number, timedOut: U): Promise<T | U> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => resolve(timedOut), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

/** The next event loop turn after `ms`; only to pace traffic, never to wait for a result. */
export const pace = (ms: number) => new Promise((r) => setTimeout(r, ms));
