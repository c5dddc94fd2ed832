// A reconnect storm's connections wait in the kernel's accept queue while the gateway is busy;
// with Node's default backlog (511) the rest were dropped and came back only after the
// clients' TCP backoff (1, 3, 7 s ...): 10,000 resumes took 71 s instead of 16. Seen from
// outside with the gateway stopped (SIGSTOP): the kernel completes every handshake up to the
// backlog on its own, so 1,500 connects at once (or what
// the kernel's cap allows) all complete, none waits for a SYN resent.
import { readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";

// The kernel caps any backlog at net.core.somaxconn (4,096 since Linux 5.4, 128 before).
const somaxconn = Number(readFileSync("/proc/sys/net/core/somaxconn", "utf8"));
const STORM = Math.min(1_500, somaxconn - 16);

describe("the listeners' accept backlog", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    gw = await startGateway({ nats: nats.url });
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    gw?.process.kill("SIGCONT");
    await gw?.stop();
    await nats?.stop();
  });

  it("holds a storm of connects while the gateway cannot accept, as nats-server's listeners do", async () => {
    gw.process.kill("SIGSTOP");
    try {
      // A SYN the kernel drops is sent again after 1 s: connects done well within that were held.
      const started = performance.now();
      const times = await Promise.all(
        Array.from(
          { length: STORM },
          () =>
            new Promise<number>((resolve, reject) => {
              const s = connect({ host: "127.0.0.1", port: gw.port("mqtt") }, () =>
                resolve(performance.now() - started),
              );
              s.on("error", reject);
              sockets.push(s);
            }),
        ),
      );
      expect(times.filter((ms) => ms > 900).length).toBe(0);
    } finally {
      gw.process.kill("SIGCONT");
    }
  });
});
