// On demand: CPU of the two machines' per-connect work (connection + session actor, the
// registry watching), without sockets or NATS: the share of a connect the machine layer
// costs, measured steadily on a busy machine.   node bench/connect-machines.mjs [N=20000]
import { performance } from "node:perf_hooks";
import { startChildMachine } from "../dist/actors/machineActor.js";
import { ActorRegistry } from "../dist/actors/registry.js";
import { mqttConnectionMachine } from "../dist/machines/mqttConnection.js";
import { mqttSessionMachine } from "../dist/machines/mqttSession.js";

const N = Number(process.argv[2] ?? 20000);
const registry = process.env.NOREG ? undefined : new ActorRegistry();
const request = { protocolVersion: 4, clientId: "c", keepaliveSec: 60, cleanStart: true, sessionExpirySec: 0 };

function connectOne(live) {
  let conn;
  let session;
  conn = startChildMachine(mqttConnectionMachine, {
    input: { connectTimeoutMs: 10_000, maxKeepaliveSec: 0 },
    registry,
    shared: true,
    onEmit: (e) => {
      if (e.type !== "open_session") return;
      // As sessionActor.ts: the session claims the client id, the directory answers, it is fresh and ready.
      session = startChildMachine(mqttSessionMachine, {
        input: { cleanStart: true, expirySec: 0, nothingStored: true },
        registry,
        shared: true,
        onEmit: (s) => {
          if (s.type === "claim") queueMicrotask(() => session.actor.send({ type: "CLAIMED" }));
          else if (s.type === "ready") conn.actor.send({ type: "SESSION_READY", sessionPresent: s.sessionPresent });
        },
      });
      live.push(session);
    },
  });
  conn.actor.send({ type: "CONNECT", request });
  conn.actor.send({ type: "NATS_ACQUIRED", account: "A", natsUp: true });
  live.push(conn);
}

async function round(n) {
  const live = [];
  globalThis.gc?.();
  const h0 = process.memoryUsage().heapUsed;
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) connectOne(live);
  // The directory's CLAIMED comes in a microtask, as in the gateway.
  await new Promise((r) => setImmediate(r));
  const c = process.cpuUsage(c0);
  const ms = performance.now() - t0;
  let bytes = Number.NaN;
  if (globalThis.gc) {
    gc();
    bytes = (process.memoryUsage().heapUsed - h0) / n;
  }
  for (const a of live) a.stop();
  return { us: (c.user + c.system) / n, wall: (ms * 1000) / n, bytes };
}
await round(2000);
const rs = [];
for (let i = 0; i < 7; i++) rs.push(await round(N));
const best = rs.sort((a, b) => a.us - b.us)[0];
console.log(`${N} connects through both machines: ${best.us.toFixed(1)} µs CPU each (${best.wall.toFixed(1)} µs wall), best of 7; heap ${best.bytes.toFixed(0)} B each (with --expose-gc)`);
process.exit(0);
