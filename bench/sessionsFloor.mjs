// The floor under the sessions bench's reconnect storm (issue 24): what Node itself costs per
// resume on this machine, with nothing of the gateway in the way. The same devices and load
// generator as bench/sessions.mjs (half 3.1.1, half MQTT 5, each a persistent session) meet a
// bare acceptor that parses CONNECT and answers CONNACK session present 1, and nothing else
// ("bare"); then the same acceptor writing one conditional KV update per CONNECT before its
// CONNACK through nats.js's KV client, as a session's claim must ("kv", a nats-server with
// JetStream beside it). A storm the gateway does in the reference's time has to fit between
// these rows and the reference's own.
//
//   node bench/sessionsFloor.mjs [N=3000] [rounds=3]
//
// Prints, per mode and round: the storm's seconds (all N CONNACKs) and the CPU seconds of the
// acceptor (and of its nats-server).
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mqtt from "mqtt-packet";
import { freePort, natsServerBinary } from "./lib/procs.mjs";
import { all, cpuSeconds, loadgen } from "./sessions.mjs";

const RECORD = JSON.stringify({
  clientId: "",
  gateway: "floor",
  expirySec: 3600,
  subscriptions: ["dev/1/cmd", "fleet/all/#"],
});

/** The acceptor, run in a child process of its own (`--serve <port> [natsUrl]`). */
async function serve(port, natsUrl) {
  let kv;
  const revisions = new Map();
  if (natsUrl) {
    const { connect } = await import("@nats-io/transport-node");
    const { Kvm } = await import("@nats-io/kv");
    kv = await new Kvm(await connect({ servers: natsUrl })).create("floor", { history: 1 });
  }
  const claim = async (clientId) => {
    const key = Buffer.from(clientId).toString("base64url");
    const value = new TextEncoder().encode(RECORD.replace('""', JSON.stringify(clientId)));
    const seen = revisions.get(key);
    revisions.set(key, seen === undefined ? await kv.create(key, value) : await kv.update(key, value, seen));
  };
  net
    .createServer((socket) => {
      socket.setNoDelay(true);
      socket.on("error", () => {});
      let version = 4;
      const parser = mqtt.parser({ protocolVersion: 5 });
      parser.on("packet", async (p) => {
        if (p.cmd === "connect") {
          version = p.protocolVersion;
          if (kv) await claim(p.clientId);
          socket.write(
            mqtt.generate(
              { cmd: "connack", sessionPresent: !p.clean, returnCode: 0, reasonCode: 0 },
              { protocolVersion: version },
            ),
          );
        } else if (p.cmd === "subscribe") {
          socket.write(
            mqtt.generate(
              { cmd: "suback", messageId: p.messageId, granted: p.subscriptions.map(() => 1) },
              { protocolVersion: version },
            ),
          );
        }
      });
      socket.on("data", (d) => parser.parse(d));
    })
    // The gateway's listen backlog (src/actors/listeners.ts): a storm's SYNs past Node's 511 wait a second each.
    .listen({ port, host: "127.0.0.1", backlog: 4096 }, () => process.send?.("listening"));
}

async function measure(mode, n, rounds) {
  const port = await freePort();
  let nats;
  let dir;
  let natsUrl = "";
  if (mode === "kv") {
    const natsPort = await freePort();
    dir = mkdtempSync(join(tmpdir(), "mqgw-floor-"));
    nats = spawn(natsServerBinary(), ["-js", "-a", "127.0.0.1", "-p", String(natsPort), "-sd", dir], {
      stdio: "ignore",
    });
    natsUrl = `nats://127.0.0.1:${natsPort}`;
    await until(() => tryConnect(natsPort));
  }
  const acceptor = spawn(process.execPath, [import.meta.filename, "--serve", String(port), natsUrl], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  await new Promise((resolve) => acceptor.once("message", resolve));
  const gen = loadgen({
    port,
    prefix: `floor${process.pid}${mode}`,
    indices: Array.from({ length: n }, (_, i) => i),
    mix: "half",
    addressBlock: 156,
    addressSub: mode === "kv" ? 2 : 1,
  });
  await gen.ready;
  await all([gen], "connect", { concurrency: 200, timeoutMs: 120_000 });
  const pids = [acceptor.pid, ...(nats ? [nats.pid] : [])];
  for (let r = 0; r < rounds; r++) {
    await all([gen], "drop");
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const before = pids.map((p) => cpuSeconds([p]));
    const storm = await all([gen], "reconnect", { timeoutMs: 120_000 });
    const cpu = pids.map((p, k) => (cpuSeconds([p]) - before[k]).toFixed(2));
    console.log(
      `${mode} N=${n} round ${r + 1}: storm ${storm.seconds.toFixed(2)} s (${storm.ok} CONNACKs), CPU s: acceptor ${cpu[0]}${nats ? `, nats-server ${cpu[1]}` : ""}`,
    );
  }
  gen.kill();
  acceptor.kill();
  nats?.kill();
  if (dir) rmSync(dir, { recursive: true, force: true });
}

function tryConnect(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1", () => resolve(s.destroy() ?? true));
    s.on("error", () => resolve(false));
  });
}

async function until(ok) {
  for (let i = 0; i < 100; i++) {
    if (await ok()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("nats-server did not start");
}

if (process.argv[2] === "--serve") await serve(Number(process.argv[3]), process.argv[4]);
else {
  const n = Number(process.argv[2] ?? 3000);
  const rounds = Number(process.argv[3] ?? 3);
  for (const mode of ["bare", "kv"]) await measure(mode, n, rounds);
  process.exit(0);
}
