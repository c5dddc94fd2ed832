// Reconnect storms of persistent sessions under `run --workers W` (docs/decisions/session-homes.md):
// per storm, how many sessions came back on another worker than the one they left, the
// JetStream API requests of the clients' account, the time to the last CONNACK, and the CPU
// of the primary, each worker and nats-server.
//   node bench/sessionsWorkers.mjs [N=3000] [storms=3] [workers=2] [checkout=.]
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { freePort } from "./lib/procs.mjs";
import { all, cpuSeconds, loadgen, startGatewayEmbedded } from "./sessions.mjs";

const [n = 3000, storms = 3, workers = 2] = process.argv.slice(2, 5).map(Number);
const at = process.argv[5];
const httpPort = await freePort();
const s = await startGatewayEmbedded(at, `127.0.0.1:${httpPort}`, ["--workers", String(workers)]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** client id -> the worker gateway id that holds it, from the primary's /clients. */
async function placement() {
  const out = new Map();
  for (let offset = 0; ; ) {
    const page = await (await fetch(`http://127.0.0.1:${httpPort}/clients?limit=1000&offset=${offset}`)).json();
    for (const c of page.clients) out.set(c.client_id, c.gateway);
    offset += page.clients.length;
    if (page.clients.length === 0 || offset >= page.total) return out;
  }
}

const gen = loadgen({
  port: s.mqttPort,
  prefix: `sw${process.pid}`,
  indices: [...Array(n).keys()],
  mix: "half",
  addressBlock: 100 + (process.pid % 100),
  addressSub: 200,
});
try {
  await gen.ready;
  const nc = await connect({ servers: s.natsUrl });
  const jsm = await jetstreamManager(nc);
  const apiRequests = async () => (await jsm.getAccountInfo()).api.total;
  // The primary first, then its children (workers, nats-server) as the side lists them.
  const pids = s.pids();
  const cpuOf = (from) => pids.map((p, k) => `${p}:${(cpuSeconds([p]) - from[k]).toFixed(2)}`).join(" ");
  const c0 = pids.map((p) => cpuSeconds([p]));
  const connected = await all([gen], "connect", { concurrency: 200, timeoutMs: 300_000 });
  console.log(
    `N=${n} --workers ${workers}: connect + subscribe ${connected.seconds.toFixed(2)} s, ${connected.ok} ok, CPU s per process ${cpuOf(c0)}`,
  );
  for (let i = 0; i < storms; i++) {
    const before = await placement();
    await all([gen], "drop");
    await sleep(3000);
    const api0 = await apiRequests();
    const cpu0 = pids.map((p) => cpuSeconds([p]));
    const r = await all([gen], "reconnect", { timeoutMs: 300_000 });
    const cpu = cpuOf(cpu0);
    const api = (await apiRequests()) - api0;
    await sleep(500);
    const after = await placement();
    let moved = 0;
    for (const [id, gw] of after) if (before.has(id) && before.get(id) !== gw) moved++;
    console.log(
      `storm ${i + 1}: ${r.seconds.toFixed(2)} s, present 1/0 ${r.present1}/${r.present0}, not back ${n - r.ok},` +
        ` on another worker ${moved}, JetStream API requests ${api}, CPU s per process ${cpu}`,
    );
  }
  await nc.close();
} finally {
  gen.kill();
  await s.stop(20_000);
}
