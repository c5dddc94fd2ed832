// A TCP proxy in front of a gateway's AMQP listener that reads every byte the gateway
// writes with the strict reader (strictAmqp.ts), as go-amqp would. The bytes pass
// unchanged and with the same backpressure (pipes both ways); a frame a strict peer
// refuses is kept as a violation and its connection cut, as go-amqp cuts it, so the test
// that caused it sees a broken connection, and the gateway handle's stop() fails with it.
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { StrictAmqpError, StrictAmqpStream } from "./strictAmqp.js";

export interface AmqpTap {
  readonly port: number;
  /** Every frame a strict peer would refuse, with why. */
  readonly violations: string[];
  /** Frames read, over every connection (a tap that read nothing checked nothing). */
  frames(): number;
  close(): Promise<void>;
}

export async function startAmqpTap(gatewayPort: number): Promise<AmqpTap> {
  const violations: string[] = [];
  const sockets = new Set<Socket>();
  let frames = 0;
  const server: Server = createServer((client) => {
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
        violations.push(`${e.message} (after ${strict.frames} frames)`);
        client.destroy();
        gateway.destroy();
      }
      frames += strict.frames - before;
    });
    // Each end's close, half-close and reset reach the other: a gateway that ends the
    // connection ends the client's, a client that resets resets the gateway's.
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
      // Bytes already piped are flushed by end(); a reset is passed on as one.
      if (gateway.errored) cut(client)();
      else if (!client.writableEnded) client.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    port,
    violations,
    frames: () => frames,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
