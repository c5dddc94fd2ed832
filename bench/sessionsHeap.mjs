// What a persistent session holds in the gateway's heap in each of its lives: N devices as in
// bench/sessions.mjs (each `dev/<i>/cmd` and `fleet/all/#` at QoS 1) connected, then dropped
// (their sessions parked: no connection, the stored readers waiting for a resume), then back.
// The heap after a forced GC, through the inspector, against the heap before the first
// connect, per session. Constant costs made on first use (mqtt-packet's table of 65,536
// packet-id buffers, 3.4 KiB a session at N = 2,000) are inside the figures; compare builds
// at one N.
//
//   node bench/sessionsHeap.mjs [--at /path/to/checkout] [--n 2000] [--cycles 1] [--deliver] [--top 0]
//
// `--deliver`: one QoS 1 message on `fleet/all/x` after the connect and after each return,
// waited for at every device (the readers then have delivered and been acknowledged).
// `--cycles C` drops and resumes them C times (a heap that grows from one cycle to the next
// keeps something of each).
// `--top K` also prints, per phase, the K kinds of object that grew most (by owner). The
// checkout must be built (`npx tsc -p tsconfig.json`). Run on demand, not by the tests.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { attach, censusDiff, heapCensus } from "./lib/inspector.mjs";
import { freePort } from "./lib/procs.mjs";

const { values: opt } = parseArgs({
  options: {
    at: { type: "string", default: join(import.meta.dirname, "..") },
    n: { type: "string", default: "2000" },
    cycles: { type: "string", default: "1" },
    deliver: { type: "boolean", default: false },
    top: { type: "string", default: "0" },
  },
});
const n = Number(opt.n);
const top = Number(opt.top);
const cycles = Number(opt.cycles);
const SETTLE_MS = 3000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const inspectPort = await freePort();
// Read by bench/sessions.mjs when it loads: the gateway it starts listens for the inspector.
process.env.BENCH_GATEWAY_NODE_ARGS = `--inspect=127.0.0.1:${inspectPort}`;
const { all, loadgen, publishOnce, startGatewayEmbedded } = await import("./sessions.mjs");

const s = await startGatewayEmbedded(opt.at);
const gen = loadgen({
  port: s.mqttPort,
  prefix: `heap${process.pid}`,
  indices: Array.from({ length: n }, (_, i) => i),
  mix: "half",
  addressBlock: 100 + (process.pid % 100),
  addressSub: 46,
});
const insp = await attach(inspectPort);
try {
  await gen.ready;
  const before = await heapCensus(insp, top > 0);
  const phases = [];
  let marks = 0;
  const deliver = async () => {
    if (!opt.deliver) return;
    const mark = `heap-${process.pid}-${++marks}`;
    await publishOnce(s.mqttPort, "fleet/all/x", mark);
    const r = await gen.ask("await", { mark, timeoutMs: 60_000 });
    if (r.got !== n) throw new Error(`${mark}: ${r.got} of ${n} devices got it`);
  };
  const phase = async (name, run) => {
    await run();
    if (name !== "parked" && !name.startsWith("parked ")) await deliver();
    await sleep(SETTLE_MS);
    phases.push([name, await heapCensus(insp, top > 0)]);
  };
  await phase("connected", () => all([gen], "connect", { concurrency: 100, timeoutMs: 120_000 }));
  for (let c = 1; c <= cycles; c++) {
    const nth = cycles > 1 ? ` ${c}` : "";
    await phase(`parked${nth}`, () => all([gen], "drop"));
    await phase(`resumed${nth}`, () => all([gen], "reconnect", { timeoutMs: 120_000 }));
  }
  console.log(
    `${opt.at}, N = ${n}: ` +
      phases.map(([name, c]) => `${name} ${((c.total - before.total) / n / 1024).toFixed(1)} KiB`).join(", ") +
      " a session",
  );
  if (top > 0) for (const [name, c] of phases) console.log(`\n-- ${name}\n${censusDiff(before, c, n, top)}`);
} finally {
  insp.close();
  gen.kill();
  await s.stop(20_000).catch(() => {});
  rmSync(s.dir, { recursive: true, force: true });
}
