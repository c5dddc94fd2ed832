// A live fan-out to a fleet of persistent sessions, on two builds of the gateway in turn: N
// devices as in bench/sessions.mjs (each `dev/<i>/cmd` and `fleet/all/#` at QoS 1), then
// rounds of M QoS 0 PUBLISHes on `fleet/all/x` from one MQTT client, one every 20 ms; per
// round, how many devices got the first and the last, duplicates, wall seconds until every
// device has the last, and the CPU seconds of the gateway and of its nats-server. What the
// clients of one NATS connection sharing a core subscription per subject gains
// (docs/decisions/shared-core-subscriptions.md).
//
//   node bench/sessionsFanout.mjs --a /path/to/checkout-a --b /path/to/checkout-b [--n 3000] [--msgs 50] [--rounds 4]
//
// Each checkout must be built (`npx tsc -p tsconfig.json`). Run on demand, not by the tests.
import { rmSync } from "node:fs";
import { parseArgs } from "node:util";
import mqtt from "mqtt-packet";
import { all, cpuSeconds, loadgen, mqttPublisher, startGatewayEmbedded } from "./sessions.mjs";

const { values: opt } = parseArgs({
  options: {
    a: { type: "string" },
    b: { type: "string" },
    n: { type: "string", default: "3000" },
    msgs: { type: "string", default: "50" },
    rounds: { type: "string", default: "4" },
  },
});
if (!opt.a || !opt.b) throw new Error("--a and --b name the two checkouts");
const n = Number(opt.n);
const msgs = Number(opt.msgs);
const rounds = Number(opt.rounds);
const PACE_MS = 20;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const sides = {};
try {
  for (const [k, name] of ["a", "b"].entries()) {
    const s = await startGatewayEmbedded(opt[name]);
    const gen = loadgen({
      port: s.mqttPort,
      prefix: `fo${process.pid}-${name}`,
      indices: Array.from({ length: n }, (_, i) => i),
      mix: "half",
      addressBlock: 100 + (process.pid % 100),
      addressSub: 40 + k,
    });
    sides[name] = { s, gen };
    await gen.ready;
    const r = await all([gen], "connect", { concurrency: 200, timeoutMs: 120_000 });
    console.log(`${name} connect + subscribe ${r.seconds?.toFixed(1)} s, ok ${r.ok}`);
    sides[name].pub = (await mqttPublisher(s.mqttPort, `fanout${process.pid}`)).socket;
  }
  for (let round = 0; round < rounds; round++) {
    for (const name of round % 2 ? ["b", "a"] : ["a", "b"]) {
      const { s, gen, pub } = sides[name];
      const pids = s.pids();
      const before = pids.map((p) => cpuSeconds([p]));
      const start = Date.now();
      for (let i = 0; i < msgs; i++) {
        pub.write(
          mqtt.generate({
            cmd: "publish",
            topic: "fleet/all/x",
            payload: `r${round}-${i}`,
            qos: 0,
            retain: false,
            dup: false,
          }),
        );
        await sleep(PACE_MS);
      }
      const last = await gen.ask("await", { mark: `r${round}-${msgs - 1}`, timeoutMs: 60_000 });
      const seconds = (Date.now() - start) / 1000;
      const cpu = pids.map((p, k) => cpuSeconds([p]) - before[k]);
      const first = await gen.ask("marks", { mark: `r${round}-0` });
      console.log(
        `round ${round} ${name}: ${msgs} to ${n}, first got by ${first.got}, last by ${last.got}, duplicates ${last.duplicates}, ` +
          `${seconds.toFixed(2)} s, CPU gateway ${cpu[0].toFixed(2)} s, nats-server ${cpu[1].toFixed(2)} s`,
      );
      await sleep(1000);
    }
  }
} finally {
  for (const { s, gen, pub } of Object.values(sides)) {
    pub?.destroy();
    gen.kill();
    await s.stop(20_000).catch(() => {});
    rmSync(s.dir, { recursive: true, force: true });
  }
}
