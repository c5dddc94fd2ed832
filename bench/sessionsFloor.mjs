// The floor under the sessions bench's reconnect storm (issue 24): what Node itself costs per
// resume on this machine, with nothing of the gateway in the way. The same devices and load
// generator as bench/sessions.mjs (half 3.1.1, half MQTT 5, each a persistent session) meet a
// bare acceptor that parses CONNECT and answers CONNACK session present 1, and nothing else
// ("bare"); then the same acceptor writing one conditional KV update per CONNECT before its
// CONNACK, as a session's claim must: a plain publish answered on one inbox ("raw", as the
// gateway writes it), or through nats.js's KV client ("kv"); a nats-server with JetStream
// beside it. A storm the gateway does in the reference's time has to fit between these rows
// and the reference's own.
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

/**
 * The acceptor, run in a child process of its own (`--serve <port> <mode> [natsUrl]`). Its
 * claim: "kv" through nats.js's KV client (`create`, then `update` on the revision it last
 * wrote); "raw" the same conditional write as a plain publish whose answer comes to one
 * wildcard inbox (what the gateway does, client/storedPublisher.ts).
 */
async function serve(port, mode, natsUrl) {
  let write;
  if (mode !== "bare") {
    const { connect, createInbox, headers } = await import("@nats-io/transport-node");
    const { Kvm } = await import("@nats-io/kv");
    const nc = await connect({ servers: natsUrl });
    const kv = await new Kvm(nc).create("floor", { history: 1 });
    if (mode === "kv")
      write = (key, value, seen) => (seen === undefined ? kv.create(key, value) : kv.update(key, value, seen));
    else {
      const inbox = createInbox();
      const waiting = new Map();
      let next = 0;
      nc.subscribe(`${inbox}.*`, {
        callback: (_, m) => {
          const token = m.subject.slice(inbox.length + 1);
          const answer = m.json();
          const waiter = waiting.get(token);
          waiting.delete(token);
          if (answer.error) waiter?.reject(new Error(answer.error.description));
          else waiter?.resolve(answer.seq);
        },
      });
      await nc.flush();
      write = (key, value, seen) =>
        new Promise((resolve, reject) => {
          const token = (next++).toString(36);
          waiting.set(token, { resolve, reject });
          const h = headers();
          if (seen !== undefined) h.set("Nats-Expected-Last-Subject-Sequence", String(seen));
          nc.publish(`$KV.floor.${key}`, value, { headers: h, reply: `${inbox}.${token}` });
        });
    }
  }
  const revisions = new Map();
  const claim = async (clientId) => {
    const key = Buffer.from(clientId).toString("base64url");
    const value = new TextEncoder().encode(RECORD.replace('""', JSON.stringify(clientId)));
    revisions.set(key, await write(key, value, revisions.get(key)));
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
          if (write) await claim(p.clientId);
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
  if (mode !== "bare") {
    const natsPort = await freePort();
    dir = mkdtempSync(join(tmpdir(), "mqgw-floor-"));
    nats = spawn(natsServerBinary(), ["-js", "-a", "127.0.0.1", "-p", String(natsPort), "-sd", dir], {
      stdio: "ignore",
    });
    natsUrl = `nats://127.0.0.1:${natsPort}`;
    await until(() => tryConnect(natsPort));
  }
  const acceptor = spawn(process.execPath, [import.meta.filename, "--serve", String(port), mode, natsUrl], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  await new Promise((resolve) => acceptor.once("message", resolve));
  const gen = loadgen({
    port,
    prefix: `floor${process.pid}${mode}`,
    indices: Array.from({ length: n }, (_, i) => i),
    mix: "half",
    addressBlock: 156,
    addressSub: ["bare", "raw", "kv"].indexOf(mode) + 1,
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

if (process.argv[2] === "--serve") await serve(Number(process.argv[3]), process.argv[4], process.argv[5]);
else {
  const n = Number(process.argv[2] ?? 3000);
  const rounds = Number(process.argv[3] ?? 3);
  for (const mode of ["bare", "raw", "kv"]) await measure(mode, n, rounds);
  process.exit(0);
}
