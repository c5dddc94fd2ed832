// A gateway whose AMQP senders left with unsettled transfers in flight stops at once on
// SIGTERM. rhea armed its heartbeat timers again when the gateway granted credit to a
// connection whose socket had gone (a NATS flush answering after the client left), and a
// 2 x idle-timeout timer (120 s) kept the stopped process alive (src/vendor/rhea.ts,
// outputWhileOpen).
import { describe, expect, it } from "vitest";
import { startGateway } from "../helpers/gateway.js";
import { startNatsServer } from "../helpers/natsServer.js";
import { AmqpClient, rhea } from "./rheaClient.js";

describe("stopping after AMQP clients left mid-traffic", () => {
  it("exits 0 on SIGTERM within seconds, not after rhea's heartbeat", async () => {
    const nats = await startNatsServer();
    try {
      const gw = await startGateway({ nats: nats.url });
      const clients = await Promise.all([0, 1, 2, 3].map(() => AmqpClient.open(gw.port("amqp"))));
      const body = rhea.message.data_section(Buffer.alloc(128, 1));
      await Promise.all(
        clients.map(
          (c, i) =>
            new Promise<void>((resolve) => {
              const sender = c.conn.open_sender({ target: { address: `leaving.${i}` }, snd_settle_mode: 0 });
              let accepted = 0;
              const pump = () => {
                while (sender.sendable()) sender.send({ body });
              };
              sender.on("sendable", pump);
              // Leave once traffic flows, with transfers still unsettled.
              sender.on("accepted", () => {
                if (++accepted === 200) resolve();
              });
            }),
        ),
      );
      for (const c of clients) c.conn.close();
      const asked = Date.now();
      expect(await gw.stop("SIGTERM")).toBe(0);
      expect(Date.now() - asked).toBeLessThan(5_000);
    } finally {
      await nats.stop();
    }
  }, 60_000);
});
