// The tap's proxy (amqpTap.ts), in a worker thread of its own: a test that blocks its
// thread (spawnSync of a Python client) would otherwise stop the very bytes it waits for.
// Run by Node itself, not vitest: imports name their .ts files, and the strict reader is
// written for Node's type stripping.
import { createConnection, createServer, type Socket } from "node:net";
import { parentPort, workerData } from "node:worker_threads";
import { StrictAmqpError, StrictAmqpStream } from "./strictAmqp.ts";

/** What the worker tells the tap. */
export type TapReport =
  | { readonly kind: "listening"; readonly port: number }
  | { readonly kind: "violation"; readonly message: string }
  | { readonly kind: "frames"; readonly n: number }
  | { readonly kind: "closed" };

const port = parentPort!;
const report = (r: TapReport) => port.postMessage(r);
const gatewayPort = (workerData as { gatewayPort: number }).gatewayPort;
const sockets = new Set<Socket>();

const server = createServer((client) => {
  const gateway = createConnection({ host: "127.0.0.1", port: gatewayPort });
  const strict = new StrictAmqpStream();
  sockets.add(client).add(gateway);
  let broken = false;
  gateway.on("data", (chunk: Buffer) => {
    if (broken) return;
    const before = strict.frames;
    try {
      strict.push(chunk);
    } catch (e) {
      if (!(e instanceof StrictAmqpError)) throw e;
      broken = true;
      report({ kind: "violation", message: `${e.message} (after ${strict.frames} frames)` });
      // As go-amqp does: the connection is over.
      client.destroy();
      gateway.destroy();
    }
    if (strict.frames > before) report({ kind: "frames", n: strict.frames - before });
  });
  // Bytes pass unchanged, with backpressure; each end's close, half-close or reset reaches the other.
  client.pipe(gateway);
  gateway.pipe(client);
  const cut = (other: Socket) => () => {
    if (!other.destroyed) other.destroy();
  };
  client.on("error", cut(gateway)).on("close", () => {
    sockets.delete(client);
    if (client.errored || !gateway.writableEnded) cut(gateway)();
  });
  gateway.on("error", cut(client)).on("close", () => {
    sockets.delete(gateway);
    if (gateway.errored) cut(client)();
    else if (!client.writableEnded) client.end();
  });
});

server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  report({ kind: "listening", port: typeof address === "object" && address ? address.port : 0 });
});

port.on("message", (m: { kind: "close" }) => {
  if (m.kind !== "close") return;
  for (const s of sockets) s.destroy();
  server.close(() => {
    report({ kind: "closed" });
    port.close();
  });
});
