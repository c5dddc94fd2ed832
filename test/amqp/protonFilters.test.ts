// Issue 26, item 3 with Debian's python3-qpid-proton: Proton's Selector (a JMS
// selector) and filtex filters on an operator queue and a stored address. Only matching
// messages arrive, the rest stay for other receivers, the gateway echoes the filters in
// force, and a selector past its bound is refused at attach with a description.
import { join } from "node:path";
import { AckPolicy, type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { runPython } from "../helpers/python.js";
import { AmqpClient, bodyText, collect } from "./rheaClient.js";

const python = (script: string, args: string[]) => runPython(join(import.meta.dirname, "clients", script), args);

let n = 0;
const unique = (prefix: string) => `${prefix}.${process.pid}x${++n}`;

describe("Qpid Proton receivers that filter", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let url: string;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "PFILT", subjects: ["pfilt.>"] });
    gw = await startGateway({ nats: nats.url, config: { bindings: [{ stream: "PFILT" }] } });
    url = `amqp://127.0.0.1:${gw.port("amqp")}`;
  });
  afterAll(async () => {
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  async function publish(subject: string, colors: string[]): Promise<void> {
    for (const [i, color] of colors.entries()) {
      const h = headers();
      h.set("Mqgw-Prop-color", color);
      await nc.publish(subject, `${color} ${i}`, { headers: h });
    }
    await nc.flush();
  }

  it("operator queue: Proton's Selector and an application-properties filter split one queue", async () => {
    const subject = unique("pfilt.q");
    await jsm.consumers.add("PFILT", {
      durable_name: "split",
      ack_policy: AckPolicy.Explicit,
      filter_subject: subject,
    });
    const queue = `${subject}::split`;
    const red = python("receive.py", [url, queue, "--count", "2", "--app-filter", "color=red"]);
    const blue = python("receive.py", [url, queue, "--count", "3", "--selector", "color = 'blue' OR color LIKE 'gr%'"]);
    const [redReady] = await red.upTo(1);
    const [blueReady] = await blue.upTo(1);
    expect(redReady).toMatchObject({ ready: true, filters: ["app"] });
    // Proton names its selector entry "selector" (rhea and Qpid JMS: "jms-selector").
    expect(blueReady).toMatchObject({ ready: true, filters: ["selector"] });
    await publish(subject, ["red", "blue", "green", "red", "blue"]);
    // What one link passes over comes back after a jittered delay, on average in two passes.
    const reds = (await red.upTo(3, 20_000)).slice(1);
    const blues = (await blue.upTo(4, 20_000)).slice(1);
    expect(reds.map((l) => l.data).sort()).toEqual(["red 0", "red 3"]);
    expect(blues.map((l) => l.data).sort()).toEqual(["blue 1", "blue 4", "green 2"]);
    expect(await red.exit()).toBe(0);
    expect(await blue.exit()).toBe(0);
    await eventually(
      async () => {
        const info = await jsm.consumers.info("PFILT", "split");
        return info.num_ack_pending === 0 && info.num_pending === 0 ? info : undefined;
      },
      10_000,
      "queue split empty",
    );
  }, 60_000);

  it("operator queue: what Proton's filter passes over stays for a rhea receiver", async () => {
    const subject = unique("pfilt.q");
    await jsm.consumers.add("PFILT", { durable_name: "rest", ack_policy: AckPolicy.Explicit, filter_subject: subject });
    const red = python("receive.py", [url, `${subject}::rest`, "--count", "1", "--selector", "color = 'red'"]);
    await red.upTo(1);
    await publish(subject, ["green", "red", "blue"]);
    const [, got] = await red.upTo(2);
    expect(got).toMatchObject({ data: "red 1" });
    expect(await red.exit()).toBe(0);
    const amqp = await AmqpClient.open(gw.port("amqp"));
    const rest = await collect(await amqp.receiver(`${subject}::rest`)).take(2);
    expect(rest.map((m) => bodyText(m.message)).sort()).toEqual(["blue 2", "green 0"]);
    await amqp.close();
  });

  it("stored address: a Proton selector with a properties filter gets only its match; rhea unfiltered sees all", async () => {
    const subject = unique("pfilt.addr");
    const filtered = python("receive.py", [
      url,
      subject,
      "--count",
      "1",
      "--selector",
      "site IN ('lab', 'plant') AND color IS NOT NULL",
      "--subject-filter",
      "&s:.eu",
    ]);
    expect((await filtered.upTo(1))[0]).toMatchObject({ ready: true, filters: ["jms-selector", "props"] });
    const amqp = await AmqpClient.open(gw.port("amqp"));
    const all = collect(await amqp.receiver(subject));
    const s = await amqp.sender(subject);
    s.send({ subject: "orders.us", application_properties: { site: "lab", color: "red" }, body: "us" });
    s.send({ subject: "orders.eu", application_properties: { site: "office", color: "red" }, body: "office" });
    s.send({ subject: "orders.eu", application_properties: { site: "plant", color: "blue" }, body: "plant eu" });
    const [, got] = await filtered.upTo(2);
    expect(got).toMatchObject({ value: "plant eu", properties: { site: "plant", color: "blue" } });
    expect(await filtered.exit()).toBe(0);
    expect((await all.take(3)).map((m) => m.message.body)).toEqual(["us", "office", "plant eu"]);
    await amqp.close();
  });

  it("a selector past its bound is refused at attach: Proton sees amqp:invalid-field and which part", async () => {
    const subject = unique("pfilt.bad");
    const wide = Array.from({ length: 300 }, (_, i) => `k = ${i}`).join(" OR ");
    const refused = python("receive.py", [url, subject, "--selector", wide]);
    const [line] = await refused.upTo(1);
    expect(line).toMatchObject({ link_error: "amqp:invalid-field" });
    expect(String(line!.description)).toMatch(/more than 256 terms, the gateway's bound/);
    await refused.exit();
    const odd = python("receive.py", [url, subject, "--selector", "color = 'a' AND"]);
    const [oddLine] = await odd.upTo(1);
    expect(oddLine).toMatchObject({ link_error: "amqp:invalid-field" });
    expect(String(oddLine!.description)).toMatch(/unexpected end of selector/);
    await odd.exit();
  });
});
