import { createServer } from "node:net";

/**
 * Ports for the servers a test starts, below Linux's ephemeral range (32768-60999), one
 * block per vitest worker. A port the OS hands out (listen on 0) was free only at that
 * moment: before the nats-server or gateway given it could bind it, a client socket of a
 * test running beside it could take it as its own local port (a CI run failed so, with
 * 300 MQTT clients of another file connecting). The OS never hands out these.
 */
const FIRST = 20_000;
const PER_WORKER = 1_000;
const WORKERS = 12;
const worker = Number(process.env.VITEST_POOL_ID ?? process.pid) % WORKERS;
/** Where in the block this file starts: files that follow one another in a worker start apart. */
let next = Math.floor(Math.random() * PER_WORKER);

/** A port nothing listens on right now, from this worker's block. */
export async function freePort(): Promise<number> {
  const base = FIRST + worker * PER_WORKER;
  for (let tried = 0; tried < PER_WORKER; tried++) {
    const port = base + (next++ % PER_WORKER);
    if (await listens(port)) return port;
  }
  throw new Error(`no free port in ${base}-${base + PER_WORKER - 1}`);
}

/** Whether `port` can be listened on now (and is let go at once). */
function listens(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}
