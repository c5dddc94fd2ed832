// Model-based tests: random command sequences (connect with or without clean start,
// subscribe, publish QoS 0/1/2, disconnect cleanly or by dropping the socket, kick,
// takeover, a NATS restart) drive real mqtt.js clients against the real gateway and
// nats-server, and every CONNACK and delivery is compared with a small reference model
// of MQTT session semantics (sessionModel.ts), on a live topic and on one a stream
// stores. A failure shrinks to a shortest sequence that still fails.
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import fc from "fast-check";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { commands, opening, tally } from "./commands.js";
import { SessionModel } from "./sessionModel.js";
import { type Shared, World } from "./world.js";

/** At least 200 sequences in CI; MODEL_RUNS asks for more (or fewer while debugging). */
const RUNS = Number(process.env.MODEL_RUNS ?? 200);
/** Short sequences (most bugs of this kind need few steps), long enough that a stored message waits for a resume now and then. */
const MAX_COMMANDS = 20;

describe("MQTT sessions against the reference model", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let side: NatsConnection;
  let shared: Shared;

  beforeAll(async () => {
    nats = await startNatsServer();
    side = await connect({ servers: nats.url, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
    // Topic 1 of every sequence (mbs/...) is stored: bound before the gateway reads its bindings.
    await (await jetstreamManager(side)).streams.add({ name: "MBSTORED", subjects: ["mbs.>"] });
    gw = await startGateway({
      nats: nats.url,
      config: {
        admin: { user: "mqg-admin", password: "admin-pw" },
        bindings: [{ stream: "MBSTORED" }],
        log: { level: "info", format: "json" },
      },
    });
    const health = async () =>
      (await fetch(`http://127.0.0.1:${gw.port("http")}/healthz`).then((r) => r.json())) as {
        nats: string;
        admin: string;
      };
    // Kicks go through the admin API: wait until it serves.
    await eventually(
      async () => ((await health()).admin === "serving" ? true : undefined),
      30_000,
      "admin API serving",
    );
    shared = {
      mqttPort: gw.port("mqtt"),
      gatewayId: gw.id,
      nats: () => side,
      admin: true,
      restartNats: async () => {
        const { port, storeDir } = nats;
        await nats.stop();
        nats = await startNatsServer({ port, storeDir });
        await eventually(
          async () => {
            const h = await health();
            return h.nats === "connected" && h.admin === "serving" ? true : undefined;
          },
          30_000,
          "gateway and its admin API back on NATS",
        );
        await eventually(() => side.flush().then(() => true), 30_000, "test's NATS connection back");
        // The clients' NATS connection is another one, and the bound stream comes back with
        // JetStream: a stored publish through the gateway, on a topic no sequence uses,
        // is acknowledged once both are (until then the gateway refuses it, 0x80).
        await eventually(
          async () => {
            const probe = await connectMqtt(gw.port("mqtt"), { protocolVersion: 5, clean: true });
            try {
              await probe.publishAsync("mbs/probe/nats-back", "probe", { qos: 1 });
              return true;
            } catch {
              return undefined;
            } finally {
              probe.end(true);
            }
          },
          30_000,
          "the clients' NATS connection and JetStream back",
        );
      },
    };
  });

  beforeEach((ctx) => {
    ctx.onTestFailed(() => {
      const warnings = gw.logs.filter((l) => Number(l.level) >= 40).slice(-40);
      console.error(`--- gateway warnings and errors\n${warnings.map((l) => JSON.stringify(l)).join("\n")}`);
    });
  });

  afterAll(async () => {
    await side?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it(`${RUNS} random sequences agree with the model`, { timeout: 300_000 }, async () => {
    const started = Date.now();
    let sequences = 0;
    await fc.assert(
      fc.asyncProperty(
        opening(),
        fc.commands(commands({ admin: shared.admin, restarts: true }), { maxCommands: MAX_COMMANDS, size: "max" }),
        async (first, cmds) => {
          sequences++;
          const world = new World(shared);
          try {
            await fc.asyncModelRun(() => ({ model: new SessionModel(), real: world }), [...first, ...cmds]);
            expect(world.problems).toEqual([]);
          } finally {
            await world.close();
          }
        },
      ),
      // A failing sequence waits out its timeouts on every shrink step: shrinking stops at
      // the budget and reports the smallest failing sequence found by then.
      { numRuns: RUNS, interruptAfterTimeLimit: 200_000, markInterruptAsFailure: true },
    );
    expect(sequences).toBeGreaterThanOrEqual(RUNS);
    console.info(
      `model-based: ${sequences} sequences in ${Date.now() - started} ms; commands run: ${JSON.stringify(Object.fromEntries(tally))}`,
    );
  });
});
