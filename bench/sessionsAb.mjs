// Reconnect storms of two builds of the gateway, in turn, on one machine at one time: what a
// change to the resume path gains, where two separate runs of bench/sessions.mjs differ by more
// than the change on a shared machine. Each build runs its embedded default with N persistent
// sessions (two QoS 1 filters each, as bench/sessions.mjs); then rounds of: all dropped, all
// back at once, A then B (B then A the next round). Wall seconds to the last CONNACK and the
// CPU seconds of each side's processes (gateway and its nats-server, each and together) per
// storm and per drop (the drop's until the storm starts, SETTLE_MS after it).
//
//   node bench/sessionsAb.mjs --a /path/to/checkout-a --b /path/to/checkout-b [--n 3000] [--rounds 4]
//
// Each checkout must be built (`npx tsc -p tsconfig.json`). Run on demand, not by the tests.
import { rmSync } from "node:fs";
import { parseArgs } from "node:util";
import { all, cpuSeconds, loadgen, startGatewayEmbedded } from "./sessions.mjs";

const { values: opt } = parseArgs({
  options: {
    a: { type: "string" },
    b: { type: "string" },
    n: { type: "string", default: "3000" },
    rounds: { type: "string", default: "4" },
  },
});
if (!opt.a || !opt.b) throw new Error("--a and --b name the two checkouts");
const n = Number(opt.n);
const rounds = Number(opt.rounds);
const SETTLE_MS = 2000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];

const sides = {};
try {
  for (const [k, name] of ["a", "b"].entries()) {
    const s = await startGatewayEmbedded(opt[name]);
    const indices = Array.from({ length: n }, (_, i) => i);
    const gen = loadgen({
      port: s.mqttPort,
      prefix: `ab${process.pid}-${name}`,
      indices,
      mix: "half",
      addressBlock: 100 + (process.pid % 100),
      addressSub: 40 + k,
    });
    await gen.ready;
    sides[name] = { s, gens: [gen], storms: [] };
  }
  for (const name of ["a", "b"]) {
    const r = await all(sides[name].gens, "connect", { concurrency: 200, timeoutMs: 120_000 });
    console.log(`${name} connect + subscribe ${r.seconds?.toFixed(1)} s, ok ${r.ok}`);
  }
  for (let round = 0; round < rounds; round++) {
    for (const name of round % 2 ? ["b", "a"] : ["a", "b"]) {
      const { s, gens, storms } = sides[name];
      // Per process: the gateway's own CPU and its nats-server's, for the drop and the storm.
      const pids = s.pids();
      const cpuOf = () => pids.map((p) => cpuSeconds([p]));
      const before = cpuOf();
      await all(gens, "drop");
      await sleep(SETTLE_MS);
      const dropped = cpuOf();
      const r = await all(gens, "reconnect", { timeoutMs: 180_000 });
      const back = cpuOf();
      const drop = dropped.map((c, k) => c - before[k]);
      const storm = back.map((c, k) => c - dropped[k]);
      const sum = (xs) => xs.reduce((a, x) => a + x, 0);
      storms.push({ seconds: r.seconds, cpu: sum(storm), drop: sum(drop), ok: r.ok, present0: r.present0 });
      console.log(
        `round ${round} ${name}: storm ${r.seconds?.toFixed(2)} s, CPU ${sum(storm).toFixed(2)} s (by process ${storm.map((c) => c.toFixed(2)).join(" / ")}), ` +
          `drop CPU ${sum(drop).toFixed(2)} s (${drop.map((c) => c.toFixed(2)).join(" / ")}), ok ${r.ok}, present0 ${r.present0}`,
      );
    }
  }
  for (const name of ["a", "b"]) {
    const { storms } = sides[name];
    console.log(
      `${name}: median storm ${median(storms.map((x) => x.seconds)).toFixed(2)} s, median CPU ${median(storms.map((x) => x.cpu)).toFixed(2)} s, median drop CPU ${median(storms.map((x) => x.drop)).toFixed(2)} s`,
    );
  }
} finally {
  for (const { s, gens } of Object.values(sides)) {
    for (const g of gens) g.kill();
    await s.stop(20_000).catch(() => {});
    rmSync(s.dir, { recursive: true, force: true });
  }
}
