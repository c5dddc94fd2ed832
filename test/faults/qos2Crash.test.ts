// Issue 22, item 6: QoS 2 exactly once across a crash of the publisher's gateway. The
// gateway a QoS 2 publisher is connected to is SIGKILLed at each moment of the exchange;
// the client resumes its session on another gateway (or the same one restarted) and does
// what MQTT has it do (resend the PUBLISH with DUP set, or the PUBREL): the bound stream
// holds the message once, and a later PUBLISH reusing the packet id is a new message.

import { join } from "node:path";
import { type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, startGateway } from "../helpers/gateway.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { freePort } from "../helpers/ports.js";
import { runPython } from "../helpers/python.js";
import { RawMqtt } from "../helpers/rawMqtt.js";

const persistent = (clientId: string, version: 4 | 5) =>
  version === 5 ? { clientId, clean: false, properties: { sessionExpiryInterval: 600 } } : { clientId, clean: false };

const publish = (topic: string, payload: string, dup: boolean) =>
  ({ cmd: "publish", topic, payload: Buffer.from(payload), qos: 2, messageId: 1, retain: false, dup }) as mqtt.Packet;
const pubrel = { cmd: "pubrel", messageId: 1 } as mqtt.Packet;

interface Moment {
  readonly name: string;
  /** Runs the exchange on the doomed gateway up to the moment, and kills it there. */
  readonly reach: (
    c: RawMqtt,
    topic: string,
    kill: () => void,
    killWhenStored: () => Promise<() => Promise<void>>,
  ) => Promise<void>;
  /** What the client sends first after resuming (MQTT 4.4: what it had not seen answered). */
  readonly resend: "publish" | "pubrel";
}

// What the client has seen decides what it resends: no PUBREC, the PUBLISH (DUP set);
// a PUBREC, the PUBREL; a PUBCOMP lost with the connection, the PUBREL again.
const moments: Moment[] = [
  {
    name: "PUBLISH written, gateway killed at once (it may not have read it)",
    reach: async (c, topic, kill) => {
      c.send(publish(topic, "first", false));
      kill();
    },
    resend: "publish",
  },
  {
    name: "killed as the stream takes the message, before PUBREC",
    reach: async (c, topic, _kill, killWhenStored) => {
      const killed = await killWhenStored();
      c.send(publish(topic, "first", false));
      await killed();
    },
    resend: "publish",
  },
  {
    name: "PUBREC sent but lost with the connection",
    reach: async (c, topic, kill) => {
      c.send(publish(topic, "first", false));
      await c.next("pubrec");
      kill();
    },
    resend: "publish",
  },
  {
    name: "after PUBREC, before PUBREL",
    reach: async (c, topic, kill) => {
      c.send(publish(topic, "first", false));
      await c.next("pubrec");
      kill();
    },
    resend: "pubrel",
  },
  {
    name: "PUBREL written, gateway killed at once (before PUBCOMP)",
    reach: async (c, topic, kill) => {
      c.send(publish(topic, "first", false));
      await c.next("pubrec");
      c.send(pubrel);
      kill();
    },
    resend: "pubrel",
  },
  {
    name: "PUBCOMP sent but lost with the connection",
    reach: async (c, topic, kill) => {
      c.send(publish(topic, "first", false));
      await c.next("pubrec");
      c.send(pubrel);
      await c.next("pubcomp");
      kill();
    },
    resend: "pubrel",
  },
];

describe("QoS 2 publisher's gateway killed (SIGKILL): exactly once across gateways", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let survivor: GatewayHandle;
  const config = { bindings: [{ stream: "ONCE" }], log: { level: "info", format: "json" } };

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "ONCE", subjects: ["once.>"] });
    survivor = await startGateway({ nats: nats.url, config });
    // The MQTT store keeps a copy while a session wants it: a persistent subscriber, away.
    const away = await RawMqtt.connected(survivor.port("mqtt"), 5, persistent("q2k-away", 5));
    away.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "free/#", qos: 2 }] } as mqtt.Packet);
    expect(((await away.next("suback")) as mqtt.ISubackPacket).granted).toEqual([2]);
    away.end();
    await away.waitClosed();
  });
  afterAll(async () => {
    await survivor?.stop();
    await nc?.close();
    await nats?.stop();
  });

  /** The payloads `stream` holds on `subject`, in stream order, each stored message once (by its stream sequence). */
  async function stored(subject: string, stream = "ONCE"): Promise<string[]> {
    return [...(await storedBySeq(subject, stream)).values()].map((m) => m.payload);
  }

  async function storedBySeq(subject: string, stream: string): Promise<Map<number, { payload: string; id: string }>> {
    const info = await jsm.streams.info(stream, { subjects_filter: subject });
    const count = info.state.subjects?.[subject] ?? 0;
    const bySeq = new Map<number, { payload: string; id: string }>();
    if (count === 0) return bySeq;
    const consumer = await jetstream(nc).consumers.get(stream, { filter_subjects: [subject] });
    const deadline = Date.now() + 30_000;
    // An ordered consumer may deliver a message again after it resets itself: keyed by sequence.
    while (bySeq.size < count && Date.now() < deadline) {
      const batch = await consumer.fetch({ max_messages: count - bySeq.size, expires: 2_000 });
      for await (const m of batch) bySeq.set(m.seq, { payload: m.string(), id: m.headers?.get("Nats-Msg-Id") ?? "" });
    }
    return new Map([...bySeq].sort((a, b) => a[0] - b[0]));
  }

  // A bound stream (the client's own JetStream publish), every moment, both versions; and a
  // subject no binding stores (the MQTT store's copy, made by the gateway) where the client resends the PUBLISH.
  const cases = [
    ...([5, 4] as const).flatMap((version) => moments.map((m, i) => [version, "bound", m.name, i] as const)),
    ...moments.flatMap((m, i) => (m.resend === "publish" ? [[5, "store", m.name, i] as const] : [])),
  ];
  it.each(cases)(
    "MQTT %s, %s: %s",
    async (version, where, _name, index) => {
      const moment = moments[index]!;
      const tag = `q2k${version}${where}m${index}`;
      const topic = where === "bound" ? `once/${tag}` : `free/${tag}`;
      // Where the copy that must be kept once goes: the bound stream, or the MQTT store.
      const [stream, subject] = where === "bound" ? ["ONCE", `once.${tag}`] : ["MQGW_MSGS", `$MQG.msgs.free.${tag}`];
      const doomed = await startGateway({ nats: nats.url, config });
      const kill = () => doomed.process.kill("SIGKILL");
      let sub: Subscription | undefined;
      // The stored copy's subject carries it as the stream takes it: the test sees it then and kills.
      const killWhenStored = async () => {
        sub = nc.subscribe(subject, { callback: () => kill() });
        await nc.flush();
        return async () => {
          await eventually(() => (doomed.process.signalCode ? true : undefined), 10_000, "killed as stored");
        };
      };
      try {
        const c = await RawMqtt.connected(doomed.port("mqtt"), version, persistent(tag, version));
        await moment.reach(c, topic, kill, killWhenStored);
        await doomed.stop();
        sub?.unsubscribe();
        c.end();

        // The client comes back to the other gateway with its session.
        const back = await RawMqtt.open(survivor.port("mqtt"), version);
        back.send({
          cmd: "connect",
          protocolId: "MQTT",
          protocolVersion: version,
          keepalive: 60,
          ...persistent(tag, version),
        } as mqtt.Packet);
        const connack = (await back.next("connack", 15_000)) as mqtt.IConnackPacket;
        expect(connack.returnCode ?? connack.reasonCode ?? 0).toBe(0);
        expect(connack.sessionPresent).toBe(true);
        if (moment.resend === "publish") {
          back.send(publish(topic, "first", true));
          expect(((await back.next("pubrec", 10_000)) as mqtt.IPubrecPacket).reasonCode ?? 0).toBe(0);
        }
        back.send(pubrel);
        const comp = (await back.next("pubcomp", 10_000)) as mqtt.IPubcompPacket;
        // A PUBREL whose exchange the dead gateway had already ended: 0x92 (MQTT 5) says so, nothing is lost.
        expect([0, 0x92]).toContain(comp.reasonCode ?? 0);
        // Every copy the client's exchange could make is in by PUBCOMP: one.
        expect(await stored(subject, stream)).toEqual(["first"]);

        // The packet id reused after PUBCOMP is a new message, stored.
        back.send(publish(topic, "second", false));
        expect(((await back.next("pubrec", 10_000)) as mqtt.IPubrecPacket).reasonCode ?? 0).toBe(0);
        back.send(pubrel);
        expect(((await back.next("pubcomp", 10_000)) as mqtt.IPubcompPacket).reasonCode ?? 0).toBe(0);
        expect(await stored(subject, stream)).toEqual(["first", "second"]);
        back.end();
      } finally {
        sub?.unsubscribe();
        kill();
        await doomed.stop();
      }
    },
    // A gateway start and a session takeover, on a loaded machine.
    120_000,
  );

  // Paced: a few in flight at each kill. Unpaced: paho queues everything at once and sends
  // all that is left at each reconnect, so the second kill lands with hundreds being
  // stored, PUBRECed and released at once; 20,000, that the backlog cannot outrun the kill
  // (10,000 did once, in a full run: the gateway stored all 8,500 left before the test read
  // paho's line and killed it, and paho finished on its second connection). The second
  // kill comes at the first line of the second connection (the first kill lands by 1,000):
  // 20,000 with a kill at 1,500 was outrun so once too, in a CI run on a loaded machine.
  it.each([
    ["paced", 500, 3_000, [750, 1_750]],
    ["unpaced", 0, 20_000, [750, 1_000]],
  ] as const)(
    "paho (3.1.1) streaming QoS 2 messages %s (%i a second, 0: all queued at once; %i of them), its gateway killed twice and restarted on the same port: each stored once, none lost",
    async (pacing, rate, count, kills) => {
      const port = await freePort();
      const onPort = { ...config, mqtt: { listen: `127.0.0.1:${port}` } };
      const subject = `once.paho-${pacing}`;
      let gw = await startGateway({ nats: nats.url, config: onPort });
      const started = [gw];
      const paho = runPython(join(import.meta.dirname, "../mqtt/clients/paho_qos2_stream.py"), [
        String(port),
        `q2k-paho-${pacing}`,
        `once/paho-${pacing}`,
        String(count),
        String(rate),
      ]);
      try {
        for (const [k, at] of kills.entries()) {
          // On the connection this kill ends (k + 1 connects so far): a line printed before the
          // previous kill would land this one while paho is still away, one reconnect fewer.
          await paho.line((l) => Number(l.done) >= at && Number(l.connects) === k + 1, 60_000);
          // Killed with publishes in flight (paho keeps 20, or all it has left after a reconnect): some stored, some PUBRECed, some released.
          gw.process.kill("SIGKILL");
          await gw.stop();
          gw = await startGateway({ nats: nats.url, config: onPort });
          started.push(gw);
        }
        const end = await paho.line((l) => l.finished !== undefined || l.error !== undefined, 120_000);
        expect(end).toMatchObject({ finished: count });
        expect(Number(end.connects)).toBeGreaterThanOrEqual(3);
        const messages = await eventually(
          async () => {
            const got = await storedBySeq(subject, "ONCE");
            return got.size >= count ? got : undefined;
          },
          30_000,
          "every message stored",
        );
        const payloads = [...messages.values()].map((m) => m.payload);
        const seen = new Map<string, Array<[number, string]>>();
        for (const [seq, m] of messages) seen.set(m.payload, [...(seen.get(m.payload) ?? []), [seq, m.id]]);
        // Each duplicate with the stream sequences and Nats-Msg-Ids of its copies, to tell how it came.
        const duplicates = [...seen].filter(([, copies]) => copies.length > 1).slice(0, 5);
        expect(
          duplicates,
          `connects ${String(end.connects)}; PUBRELs paho owed kept ${String(end.pubrels_kept)}; warnings ${JSON.stringify(started.flatMap((g) => g.logs.filter((l) => Number(l.level) >= 40)).slice(0, 8))}`,
        ).toEqual([]);
        expect(payloads.length).toBe(count);
        expect(new Set(payloads)).toEqual(new Set(Array.from({ length: count }, (_, i) => String(i))));
      } finally {
        paho.kill();
        await gw.stop();
      }
    },
    300_000,
  );
});
