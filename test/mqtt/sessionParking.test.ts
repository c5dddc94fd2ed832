// A persistent session whose connection ends with nothing unacknowledged keeps its stored
// subscriptions parked on the gateway for a while; a resume there reads on with no JetStream
// request (docs/decisions/session-parking.md). Seen from outside: every message published
// meanwhile arrives once, in order, and the account sees no UNPIN or RESET for the resume,
// while a resume elsewhere takes the consumers over as before (and asks UNPIN and RESET only
// where an older reader's pull still waits or something is held: protocol/consumerTakeover.ts).
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { MqttClient } from "mqtt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sessionKey } from "../../src/actors/mqtt/kvSessionStore.js";
import { type GatewayHandle, metric, startGateway } from "../helpers/gateway.js";
import { connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";

/** How long a fault stalls nats-server: longer than the gateway's JetStream request timeout (5 s). */
const STALL_MS = 6_000;

describe("parked stored subscriptions", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  const gws: GatewayHandle[] = [];
  /** The JetStream takeover requests the account saw: `UNPIN <consumer>` / `RESET <consumer>`. */
  const takeovers: string[] = [];
  /** The consumers whose INFO the account saw (a takeover's first request). */
  const infos: string[] = [];
  /** The subjects of the direct gets the account saw (a session record's read names its key). */
  const reads: string[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    await (await jetstreamManager(nc)).streams.add({ name: "PARK", subjects: ["park.>"] });
    nc.subscribe("$JS.API.CONSUMER.>", {
      callback: (_e, m) => {
        const [, , , op, , consumer] = m.subject.split(".");
        if (op === "UNPIN" || op === "RESET") takeovers.push(`${op} ${consumer}`);
        if (op === "INFO") infos.push(consumer ?? "");
      },
    });
    nc.subscribe("$JS.API.DIRECT.GET.>", { callback: (_e, m) => reads.push(m.subject) });
    await nc.flush();
    const config = { bindings: [{ stream: "PARK" }] };
    gws.push(await startGateway({ nats: nats.url, config }), await startGateway({ nats: nats.url, config }));
  });
  afterAll(async () => {
    await nc?.close();
    for (const g of gws) await g.stop();
    await nats?.stop();
  });

  /** Waits until `gw` holds `n` parked stored readers (mqgw_actors). */
  async function parkedOn(gw: GatewayHandle, n: number) {
    await eventually(async () => {
      const now = await metric(gw, "mqgw_actors", { machine: "storedDelivery", state: "active.read.parked" });
      return now === n ? true : undefined;
    });
  }

  /** A persistent subscriber (MQTT 5, expiry 600) to a bound filter and an MQTT-store filter. */
  async function subscriber(gw: GatewayHandle, clientId: string, received: string[], connectTimeout?: number) {
    const c = await connectMqtt(
      gw.port("mqtt"),
      {
        protocolVersion: 5,
        clientId,
        clean: false,
        properties: { sessionExpiryInterval: 600 },
        resubscribe: false,
        ...(connectTimeout ? { connectTimeout } : {}),
      },
      (client) => client.on("message", (topic, payload) => received.push(`${topic} ${payload}`)),
    );
    if (!c.connack.sessionPresent) await c.subscribeAsync(["park/+", "free/+"], { qos: 1 });
    return c;
  }

  async function publishAll(pub: MqttClient, from: number, to: number): Promise<string[]> {
    const sent: string[] = [];
    for (let i = from; i < to; i++) {
      const topic = i % 2 === 0 ? "park/x" : "free/y";
      await pub.publishAsync(topic, String(i), { qos: 1 });
      sent.push(`${topic} ${i}`);
    }
    return sent;
  }

  /** A session that got four messages on the first gateway and left it cleanly, parked there; its publisher stays. */
  async function parkedWithFour(clientId: string) {
    const received: string[] = [];
    const pub = await connectMqtt(gws[0]!.port("mqtt"), { protocolVersion: 5 });
    const sub = await subscriber(gws[0]!, clientId, received);
    const sent = await publishAll(pub, 0, 4);
    await eventually(() => (received.length === 4 ? true : undefined));
    await sub.endAsync();
    await parkedOn(gws[0]!, 2);
    return { received, pub, sent };
  }

  /** The takeover requests since `from`, by kind. */
  const takeoverOps = (from: number) =>
    takeovers
      .slice(from)
      .map((t) => t.split(" ")[0])
      .sort();

  /** The consumers of both streams the sessions read, with what waits at each and what it holds. */
  async function consumersOf() {
    const jsm = await jetstreamManager(nc);
    const all: Array<{ name: string; num_waiting: number; num_ack_pending: number }> = [];
    for (const stream of ["PARK", "MQGW_MSGS"]) for await (const c of jsm.consumers.list(stream)) all.push(c);
    return all;
  }

  /** Waits until the two consumers made since `earlier` have no pull waiting and nothing held. */
  async function quiet(earlier: Set<string>) {
    // A pull lives PULL_EXPIRES_MS, and the last one was asked just before the end.
    await eventually(
      async () => {
        const mine = (await consumersOf()).filter((c) => !earlier.has(c.name));
        return mine.length === 2 && mine.every((c) => c.num_waiting === 0 && c.num_ack_pending === 0)
          ? true
          : undefined;
      },
      20_000,
      "the session's pulls expired",
    );
  }

  /** Resumes on `gw` (session present), publishes `from`..`to` live, and checks every message arrived once, in order. */
  async function resumeAndCheck(
    gw: GatewayHandle,
    clientId: string,
    received: string[],
    pub: MqttClient,
    sent: string[],
    from: number,
    to: number,
  ) {
    const sub = await subscriber(gw, clientId, received);
    expect(sub.connack.sessionPresent).toBe(true);
    sent.push(...(await publishAll(pub, from, to)));
    await eventually(() => (received.length >= sent.length ? true : undefined));
    expectExactly(received, sent);
    return sub;
  }

  /** Every message once, and on each topic in the order published. */
  function expectExactly(received: string[], sent: string[]) {
    expect([...received].sort()).toEqual([...sent].sort());
    for (const topic of ["park/x", "free/y"])
      expect(received.filter((r) => r.startsWith(`${topic} `))).toEqual(sent.filter((s) => s.startsWith(`${topic} `)));
  }

  it.each([
    ["a clean disconnect", (c: MqttClient) => c.endAsync()],
    ["a dropped socket", async (c: MqttClient) => void c.end(true)],
  ])("after %s, a resume on the same gateway reads on without taking its consumers over", async (_how, leave) => {
    const clientId = `parker-${takeovers.length}-${Date.now()}`;
    const received: string[] = [];
    const pub = await connectMqtt(gws[0]!.port("mqtt"), { protocolVersion: 5 });
    let sub = await subscriber(gws[0]!, clientId, received);
    const sent = await publishAll(pub, 0, 6);
    await eventually(() => (received.length === 6 ? true : undefined));
    await leave(sub);
    // Parked once the gateway saw the connection go.
    await parkedOn(gws[0]!, 2);
    sent.push(...(await publishAll(pub, 6, 12)));
    const before = takeovers.length;
    const readsBefore = reads.length;
    sub = await resumeAndCheck(gws[0]!, clientId, received, pub, sent, 12, 16);
    expect(takeovers.slice(before)).toEqual([]);
    // Nor is the record read: the gateway wrote it when the connection ended here.
    expect(reads.slice(readsBefore).filter((r) => r.endsWith(`.${sessionKey(clientId)}`))).toEqual([]);
    await sub.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
    await pub.endAsync();
  });

  it("a record written by someone else while the session was parked is read, not resumed over: the resume takes its consumers over and misses nothing", async () => {
    const clientId = `rewritten-${Date.now()}`;
    const { received, pub, sent } = await parkedWithFour(clientId);
    // A writer that told no gateway (as one whose claim has not arrived yet): the same session, a newer revision.
    const kv = await new Kvm(nc).open("MQGW_SESSIONS");
    const entry = await kv.get(sessionKey(clientId));
    await kv.put(sessionKey(clientId), entry!.value);
    sent.push(...(await publishAll(pub, 4, 8)));
    const readsBefore = reads.length;
    const resumed = await resumeAndCheck(gws[0]!, clientId, received, pub, sent, 8, 10);
    // Its conditional write found the newer record: it was read.
    expect(reads.slice(readsBefore).filter((r) => r.endsWith(`.${sessionKey(clientId)}`)).length).toBeGreaterThan(0);
    await resumed.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
    await pub.endAsync();
  });

  // Which comes first once nats-server goes on, the write landing or the read after it, is
  // nats-server's to decide: either way the resume adopts (a read that finds the write finds
  // its own, ParkedHold.recognise; sessionFleet's stalls meet both orders).
  it("a resume whose write of the parked record goes unanswered (JetStream stalled past its timeout) reads the record, adopts its readers and misses nothing", async () => {
    const clientId = `stalled-${Date.now()}`;
    const { received, pub, sent } = await parkedWithFour(clientId);
    sent.push(...(await publishAll(pub, 4, 8)));
    const before = takeovers.length;
    const infosBefore = infos.length;
    // nats-server takes the write and answers nothing until after the gateway's 5 s request timeout.
    nats.process.kill("SIGSTOP");
    const resumed = subscriber(gws[0]!, clientId, received, 30_000);
    await new Promise((r) => setTimeout(r, STALL_MS));
    nats.process.kill("SIGCONT");
    const c = await resumed;
    expect(c.connack.sessionPresent).toBe(true);
    sent.push(...(await publishAll(pub, 8, 10)));
    await eventually(() => (received.length >= sent.length ? true : undefined));
    expectExactly(received, sent);
    // The parked readers were adopted, nothing taken over.
    expect(takeovers.slice(before)).toEqual([]);
    expect(infos.slice(infosBefore)).toEqual([]);
    await c.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
    await pub.endAsync();
  });

  it("a session whose consumers never delivered (never pinned) is parked too: a resume on the same gateway reads on with neither UNPIN nor RESET, and gets what came meanwhile", async () => {
    const clientId = `unpinned-${Date.now()}`;
    const received: string[] = [];
    const pub = await connectMqtt(gws[0]!.port("mqtt"), { protocolVersion: 5 });
    let sub = await subscriber(gws[0]!, clientId, received);
    await sub.endAsync();
    await parkedOn(gws[0]!, 2);
    // The parked readers' pulls under way, with no pin id, are pinned by these: held for the resume.
    const sent = await publishAll(pub, 0, 6);
    const before = takeovers.length;
    sub = await resumeAndCheck(gws[0]!, clientId, received, pub, sent, 6, 10);
    expect(takeoverOps(before)).toEqual([]);
    await sub.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
    await pub.endAsync();
  });

  it("a never-pinned session resumed on another gateway while its parked pulls still wait gets what is published next at once, not after the pin's 30 s timeout", async () => {
    // The parked readers' pulls, still heard (here by a `>` subscriber, as a wiretap or a
    // bridge in the account would), are ahead of the new reader's at the server: the next
    // message pins one of them. The new reader watches for that (checkPin) until they expire.
    // Tried until a takeover found them waiting (UNPIN and RESET on both consumers), which the
    // parked pulls' remaining life (0-3 s) leaves to timing.
    const everything = nc.subscribe(">");
    await nc.flush();
    let found = false;
    for (let attempt = 0; attempt < 3 && !found; attempt++) {
      const clientId = `unpinned-moved-${attempt}-${Date.now()}`;
      const received: string[] = [];
      const pub = await connectMqtt(gws[1]!.port("mqtt"), { protocolVersion: 5 });
      let sub = await subscriber(gws[0]!, clientId, received);
      await sub.endAsync();
      await parkedOn(gws[0]!, 2);
      const before = takeovers.length;
      // resumeAndCheck allows 10 s for what is published after the CONNACK (the pin's timeout is 30 s).
      sub = await resumeAndCheck(gws[1]!, clientId, received, pub, [], 0, 6);
      found =
        new Set(
          takeovers
            .slice(before)
            .filter((t) => t.startsWith("RESET "))
            .map((t) => t.split(" ")[1]),
        ).size === 2;
      await parkedOn(gws[0]!, 0);
      await sub.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
      await pub.endAsync();
    }
    everything.unsubscribe();
    expect(found).toBe(true);
  });

  it("a session whose consumers never delivered, resumed once its parked pulls expired, is read on with neither UNPIN nor RESET, and gets what came meanwhile", async () => {
    const clientId = `expired-pulls-${Date.now()}`;
    const received: string[] = [];
    const earlier = new Set((await consumersOf()).map((c) => c.name));
    const pub = await connectMqtt(gws[0]!.port("mqtt"), { protocolVersion: 5 });
    let sub = await subscriber(gws[0]!, clientId, received);
    await sub.endAsync();
    // Nothing of this session waits at the server any more (its ended pulls expired): nothing to fence or hand back.
    await quiet(earlier);
    const sent = await publishAll(pub, 0, 6);
    const before = takeovers.length;
    sub = await resumeAndCheck(gws[0]!, clientId, received, pub, sent, 6, 10);
    expect(takeoverOps(before)).toEqual([]);
    await sub.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
    await pub.endAsync();
  });

  it("a resume on another gateway once the parked readers' pulls expired only fences their pins (UNPIN, no RESET), and misses nothing", async () => {
    const clientId = `pinned-quiet-${Date.now()}`;
    const received: string[] = [];
    const earlier = new Set((await consumersOf()).map((c) => c.name));
    const pub = await connectMqtt(gws[1]!.port("mqtt"), { protocolVersion: 5 });
    let sub = await subscriber(gws[0]!, clientId, received);
    const sent = await publishAll(pub, 0, 4);
    await eventually(() => (received.length === 4 ? true : undefined));
    sub.end(true);
    await parkedOn(gws[0]!, 2);
    // Parked readers do not pull: once their last pulls expired, only the pins are left.
    await quiet(earlier);
    sent.push(...(await publishAll(pub, 4, 10)));
    const before = takeovers.length;
    sub = await resumeAndCheck(gws[1]!, clientId, received, pub, sent, 10, 14);
    expect(takeoverOps(before)).toEqual(["UNPIN", "UNPIN"]);
    await sub.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
    await pub.endAsync();
  });

  it("a resume on another gateway moments after the drop asks the first gateway, which lets its parked readers go before the consumers are taken over", async () => {
    // Parked pulls without a pin id still waiting at the server could be pinned by what the
    // takeover's RESET hands back and hold it for nobody (sessionHolder.ts).
    const clientId = `asked-${Date.now()}`;
    const received: string[] = [];
    const pub = await connectMqtt(gws[1]!.port("mqtt"), { protocolVersion: 5 });
    let sub = await subscriber(gws[0]!, clientId, received);
    sub.end(true);
    await parkedOn(gws[0]!, 2);
    const sent = await publishAll(pub, 0, 4);
    sub = await subscriber(gws[1]!, clientId, received);
    expect(sub.connack.sessionPresent).toBe(true);
    // Let go before the CONNACK, not when the claim reaches it.
    expect(await metric(gws[0]!, "mqgw_actors", { machine: "storedDelivery", state: "active.read.parked" })).toBe(0);
    await gws[0]!.waitForLog(
      (l) => l.client_id === clientId && l.msg === "session asked for by another gateway",
      5_000,
    );
    sent.push(...(await publishAll(pub, 4, 8)));
    await eventually(() => (received.length >= sent.length ? true : undefined), 5_000);
    expectExactly(received, sent);
    await sub.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
    await pub.endAsync();
  });

  it("a resume on another gateway takes the consumers over from the parked ones, and misses nothing", async () => {
    const clientId = `mover-${Date.now()}`;
    const received: string[] = [];
    const pub = await connectMqtt(gws[1]!.port("mqtt"), { protocolVersion: 5 });
    let sub = await subscriber(gws[0]!, clientId, received);
    const sent = await publishAll(pub, 0, 4);
    await eventually(() => (received.length === 4 ? true : undefined));
    sub.end(true);
    await parkedOn(gws[0]!, 2);
    sent.push(...(await publishAll(pub, 4, 10)));
    const before = takeovers.length;
    sub = await resumeAndCheck(gws[1]!, clientId, received, pub, sent, 10, 14);
    // Each of its two consumers fenced and rewound once; the first gateway let its parked ones go.
    expect(takeoverOps(before)).toEqual(["RESET", "RESET", "UNPIN", "UNPIN"]);
    await parkedOn(gws[0]!, 0);
    // Back on the first gateway: it holds nothing parked of this client any more, so it takes over too.
    sub.end(true);
    await parkedOn(gws[1]!, 2);
    sent.push(...(await publishAll(pub, 14, 18)));
    sub = await subscriber(gws[0]!, clientId, received);
    await eventually(() => (received.length >= sent.length ? true : undefined));
    expectExactly(received, sent);
    await sub.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
    await pub.endAsync();
  });
});
