// On demand: what one idle MQTT connection holds in the gateway's heap, by object kind and
// owner (a heap snapshot through the inspector before and after N clients connect).
//   node bench/idle-heap.mjs [N=2000]   -> bench/results/profiles/idle.heap.txt
import { fork } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { attach, censusDiff, heapCensus } from "./lib/inspector.mjs";
import { freePort, rssKiB, startGateway, startNatsServer } from "./lib/procs.mjs";

const N = Number(process.argv[2] ?? 2000);
const nats = await startNatsServer({ name: "idle-heap" });
const port = await freePort();
const gw = await startGateway({ nats, nodeArgs: [`--inspect=127.0.0.1:${port}`] });
const insp = await attach(port);
const open = (spec) =>
  new Promise((resolve) => {
    const p = fork(join(import.meta.dirname, "idle.mjs"), [JSON.stringify(spec)]);
    p.on("message", (m) => m.opened && resolve({ p, m }));
  });
await open({ port: gw.mqttPort, count: 5, concurrency: 1, localAddress: "127.0.0.1", prefix: "warm", closeAfterOpen: true });
await new Promise((r) => setTimeout(r, 1500));
const before = await heapCensus(insp, true);
const rssBefore = rssKiB(gw.pid);
const { p, m } = await open({ port: gw.mqttPort, count: N, concurrency: 64, localAddress: "127.0.0.5", prefix: "idle" });
await new Promise((r) => setTimeout(r, 3000));
const after = await heapCensus(insp, true);
const text = [
  `${m.opened.connected} idle MQTT 3.1.1 connections; gateway RSS grew ${((rssKiB(gw.pid) - rssBefore) / N).toFixed(1)} KiB/conn (inspector attached, after forced GCs)`,
  censusDiff(before, after, N, 60),
].join("\n");
mkdirSync(join(import.meta.dirname, "results/profiles"), { recursive: true });
writeFileSync(join(import.meta.dirname, "results/profiles/idle.heap.txt"), `${text}\n`);
console.log(text);
p.send("close");
insp.close();
await gw.stop();
await nats.stop();
process.exit(0);
