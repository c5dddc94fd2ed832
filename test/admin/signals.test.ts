// CONTRACT "Signals": SIGHUP reloads the config file (new work gets routes, limits and
// log level; connected clients stay; a bad file is refused and the old config stays), and
// SIGUSR2 is lame duck mode (MQTT 5: DISCONNECT 0x8B, /healthz 503, then exit 0).
import { readFileSync, writeFileSync } from "node:fs";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { IDisconnectPacket, IPublishPacket } from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { RawMqtt } from "../helpers/rawMqtt.js";
import { healthz } from "./world.js";

let unique = 0;

/** Publishes to the routed subject `orders` with a region, as a route needs. */
function publishOrder(client: RawMqtt, region: string): void {
  client.send({
    cmd: "publish",
    topic: "orders",
    payload: Buffer.from(region),
    qos: 0,
    retain: false,
    dup: false,
    properties: { userProperties: { region } },
  } as IPublishPacket);
}

/** The subject the next message on `orders.>` arrives on; subscribe before publishing. */
async function nextOrderSubject(nc: NatsConnection): Promise<() => Promise<string>> {
  const sub = nc.subscribe("orders.>", { max: 1 });
  await nc.flush();
  return async () => {
    for await (const m of sub) return m.subject;
    throw new Error("no order");
  };
}

describe("signals", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let file: string;

  const edit = (change: (config: { mqtt: Record<string, unknown>; log: Record<string, unknown> }) => void) => {
    const config = parse(readFileSync(file, "utf8"));
    change(config);
    writeFileSync(file, stringify(config));
  };
  /** Sends SIGHUP and waits for the reload's outcome, logged after the count of outcomes so far. */
  const reload = async () => {
    const outcome = (l: Record<string, unknown>) =>
      l.msg === "config reloaded" || String(l.msg).startsWith("config reload refused");
    const before = gw.logs.filter(outcome).length;
    gw.process.kill("SIGHUP");
    return gw.waitForLog((l) => outcome(l) && gw.logs.filter(outcome).indexOf(l) === before);
  };
  const client = () => RawMqtt.connected(gw.port("mqtt"), 5, { clientId: `sig-${++unique}` });

  beforeAll(async () => {
    nats = await startNatsServer();
    gw = await startGateway({
      nats: nats.url,
      config: {
        id: "gw-signals",
        mqtt: { listen: "127.0.0.1:0", routes: [{ subject: "orders", template: "orders.{region}" }] },
        ldm: { duration: "2s" },
      },
    });
    const args = gw.process.spawnargs;
    file = args[args.indexOf("--config") + 1] as string;
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  it("SIGHUP: new connections get the new routes and log level; connected clients keep theirs", async () => {
    const before = await client();
    edit((c) => {
      c.mqtt.routes = [{ subject: "orders", template: "orders.v2.{region}" }];
      c.log.level = "info";
    });
    const reloaded = await reload();
    expect(reloaded.msg).toBe("config reloaded");
    expect(reloaded.changed).toEqual(["log.level", "mqtt.routes"]);
    const logged = gw.logs.length;

    const after = await client();
    let subject = await nextOrderSubject(nc);
    publishOrder(after, "eu");
    expect(await subject()).toBe("orders.v2.eu");
    subject = await nextOrderSubject(nc);
    publishOrder(before, "us");
    expect(await subject()).toBe("orders.us");
    // Debug lines (a new NATS connection, for instance) stopped with the reload.
    expect(gw.logs.slice(logged).filter((l) => l.level === 20)).toEqual([]);
    before.end();
    after.end();
  });

  it("SIGHUP with a bad file or a restart-only change: refused with the reasons, the running config stays", async () => {
    const kept = await client();
    const good = readFileSync(file, "utf8");
    writeFileSync(file, `${good}mqtt_typo: 1\n`);
    const bad = await reload();
    expect(bad.msg).toMatch(/refused/);
    expect(bad.problems).toEqual([expect.stringMatching(/^mqtt_typo: unknown key/)]);

    writeFileSync(file, good);
    edit((c) => {
      c.mqtt.listen = "127.0.0.1:1";
      c.mqtt.routes = [{ subject: "orders", template: "orders.v3.{region}" }];
    });
    const restartOnly = await reload();
    expect(restartOnly.msg).toMatch(/refused/);
    expect(restartOnly.problems).toEqual(["mqtt.listen: changed, but applies only on a restart"]);

    const fresh = await client();
    const subject = await nextOrderSubject(nc);
    publishOrder(fresh, "eu");
    expect(await subject()).toBe("orders.v2.eu");
    kept.send({ cmd: "pingreq" });
    await kept.next("pingresp");
    writeFileSync(file, good);
    kept.end();
    fresh.end();
  });

  it("SIGUSR2: lame duck closes MQTT 5 clients with 0x8B over ldm.duration, /healthz 503, then exit 0", async () => {
    const clients = await Promise.all([client(), client()]);
    const exited = new Promise<number | null>((resolve) => gw.process.once("exit", (code) => resolve(code)));
    gw.process.kill("SIGUSR2");
    const disconnects = clients.map((c) => c.next("disconnect", 5_000));
    // Two clients over 2s: the first goes at once, the second a second later.
    await Promise.race(disconnects);
    const during = await healthz(gw);
    expect(during.status).toBe(503);
    expect(during.body.status).toBe("lame_duck");
    expect((await Promise.all(disconnects)).map((p) => (p as IDisconnectPacket).reasonCode)).toEqual([0x8b, 0x8b]);
    expect(await exited).toBe(0);
  });
});
