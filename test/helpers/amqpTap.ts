// A TCP proxy in front of a gateway's AMQP listener that reads every byte the gateway
// writes with the strict reader (strictAmqp.ts), as go-amqp would. The bytes pass
// unchanged and with the same backpressure; a frame a strict peer refuses is kept as a
// violation and its connection cut, as go-amqp cuts it, so the test that caused it sees a
// broken connection, and the gateway handle's stop() fails with it. The proxy runs in a
// worker thread (amqpTapWorker.ts).
import { Worker } from "node:worker_threads";
import type { TapReport } from "./amqpTapWorker.ts";

export interface AmqpTap {
  readonly port: number;
  /** Every frame a strict peer would refuse, with why. */
  readonly violations: string[];
  /** Frames read, over every connection (a tap that read nothing checked nothing). */
  frames(): number;
  close(): Promise<void>;
}

export async function startAmqpTap(gatewayPort: number): Promise<AmqpTap> {
  const worker = new Worker(new URL("./amqpTapWorker.ts", import.meta.url), { workerData: { gatewayPort } });
  // A gateway killed without stop() leaves its tap behind: it must not hold the test process.
  worker.unref();
  const violations: string[] = [];
  let frames = 0;
  let closed: (() => void) | undefined;
  let closing: Promise<void> | undefined;
  const port = await new Promise<number>((resolve, reject) => {
    worker.once("error", reject);
    worker.on("message", (r: TapReport) => {
      if (r.kind === "listening") resolve(r.port);
      else if (r.kind === "violation") violations.push(r.message);
      else if (r.kind === "frames") frames += r.n;
      else closed?.();
    });
  });
  return {
    port,
    violations,
    frames: () => frames,
    // Once, however often the gateway handle is stopped.
    close: () => {
      closing ??= (async () => {
        const done = new Promise<void>((resolve) => {
          closed = resolve;
        });
        worker.postMessage({ kind: "close" });
        await done;
        await worker.terminate();
      })();
      return closing;
    },
  };
}
