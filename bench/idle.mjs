// Idle MQTT connections (forked by bench/run.mjs, several at once to spread descriptors):
// opens `count` connections from `localAddress` with `concurrency` CONNECTs outstanding,
// reports when the first started and the last CONNACK came, holds them (PINGREQ every
// 30 s, keep alive 60 s), and closes them when told.
import { performance } from "node:perf_hooks";
import { encode, RawMqtt } from "./lib/mqttWire.mjs";

const spec = JSON.parse(process.argv[2]);
const conns = [];
let failed = 0;
let firstError;

async function open() {
  const start = performance.timeOrigin + performance.now();
  let next = 0;
  const worker = async () => {
    while (next < spec.count) {
      const i = next++;
      const c = new RawMqtt({ host: "127.0.0.1", port: spec.port, localAddress: spec.localAddress, clientId: `${spec.prefix}-${i}`, keepalive: 60 });
      try {
        await c.connect();
        conns.push(c);
      } catch (e) {
        failed++;
        firstError ??= e.message;
        c.socket?.destroy();
      }
    }
  };
  await Promise.all(Array.from({ length: spec.concurrency }, worker));
  const end = performance.timeOrigin + performance.now();
  return { start, end, connected: conns.length, failed, firstError };
}

const ping = setInterval(() => {
  for (const c of conns) if (!c.closed) c.write(encode.pingreq());
}, 30_000);

process.on("message", (m) => {
  if (m === "close") {
    clearInterval(ping);
    const alive = conns.filter((c) => !c.closed).length;
    for (const c of conns) c.socket.destroy();
    process.send({ closed: true, aliveAtClose: alive });
    setTimeout(() => process.exit(0), 50);
  }
});

open().then(
  (r) => {
    process.send({ opened: r });
    if (spec.closeAfterOpen) {
      for (const c of conns) c.close();
      setTimeout(() => process.exit(0), 200);
    }
  },
  (e) => process.send({ error: e.stack ?? String(e) }),
);
