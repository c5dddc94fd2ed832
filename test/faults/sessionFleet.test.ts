// Issue 24, the sessions bench's phases (bench/sessions.mjs) at CI's size with JetStream
// requests timing out: N persistent sessions (half MQTT 3.1.1 clean session 0, half MQTT 5
// Session Expiry 3600), each subscribed at QoS 1 to its own `dev/<i>/cmd` and the shared
// `fleet/all/#`, go through
//   1 connect all, then subscribe all (a refused SUBSCRIBE is asked again),
//   2 reconnect storms (every socket destroyed, all back at once, clean start 0),
//   3 offline messages (all dropped, a message to all and one to each, all back), the readers
//     parked on the gateway for the resumes to adopt (docs/decisions/session-parking.md): first
//     readers the server never pinned, then pinned ones,
//   5 gateway restarts (SIGTERM, the same config and ports, devices back with backoff): the new
//     gateway holds nothing parked, so every resume takes its consumers over (INFO, then UNPIN
//     and RESET as the consumer's state needs); then a live message to all,
// while nats-server stalls (SIGSTOP for longer than a JetStream request's 5 s timeout) at the
// moment each step names: a count of devices done (in, subscribed), not a time. After every
// step: every session back with session present 1, every message it was sent received once
// (a second copy is allowed by QoS 1 only marked DUP; counted and reported), nothing it was
// not sent, and 4: two consumers a session in the account, no more (nothing lost, nothing
// left behind). The bench's sixth (RSS) is the bench's.
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type mqtt from "mqtt-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayHandle, metric, startGateway } from "../helpers/gateway.js";
import { connectMqtt } from "../helpers/mqttClient.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { freePort } from "../helpers/ports.js";
import { RawMqtt } from "../helpers/rawMqtt.js";
import { storeConsumers } from "../helpers/storeConsumers.js";

const N = 300;
/** Longer than nats.js's JetStream request timeout (5 s): requests in flight time out. */
const STALL_MS = 6_000;
/** Devices connecting at once in phase 1. */
const CONNECT_IN_FLIGHT = 50;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("a fleet of persistent sessions through the sessions bench's phases while JetStream requests time out", () => {
  let nats: NatsServerHandle;
  let gw: GatewayHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  /** The gateway's config: the same on restart, its MQTT port fixed so devices find it again. */
  let config: Record<string, unknown>;
  let mqttPort = 0;
  const devices: Array<RawMqtt | undefined> = [];
  /** What each device received, by payload: every copy, and those marked DUP. */
  const received = Array.from({ length: N }, () => new Map<string, { copies: number; dups: number }>());
  /** What each device was sent. */
  const sent = Array.from({ length: N }, () => new Set<string>());
  let step = "connect";
  /** Devices in since the step began (a CONNACK accepting them). */
  let inThisStep = new Set<number>();
  /** Devices done since the step began (in, or subscribed in the subscribe step): a stall's moment is a count of them. */
  let progress = 0;
  const moments: Array<{ at: number; reached: () => void }> = [];
  const presentZero: string[] = [];
  /** CONNACK refusals and unanswered CONNECTs by step and code, and SUBSCRIBEs the gateway refused: devices ask again. */
  const refusals = new Map<string, number>();
  /** Connections the gateway ended (a DISCONNECT reason, or a close) by step: the device comes back. */
  const closedByGateway = new Map<string, number>();
  /** Second copies of a message a device received, by step and DUP flag. */
  const again = new Map<string, number>();
  /** The JetStream takeover requests the account saw (INFO, UNPIN, RESET), by step. */
  const takeovers = new Map<string, number>();
  const timings: string[] = [];
  /** Deliveries later than 10 s after all were back, with their consumer's state then. */
  const late: string[] = [];
  /** Pins a takeover handed back (consumer-takeover.md), by the gateways before this one. */
  let handedBack = 0;
  const handedBackBy = (g: GatewayHandle) => g.logs.filter((l) => String(l.msg).startsWith("a takeover's pin")).length;
  let ending = false;

  const tally = (m: Map<string, number>, key: string) => m.set(key, (m.get(key) ?? 0) + 1);
  const version = (i: number): 4 | 5 => (i % 2 === 0 ? 5 : 4);

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    nc.subscribe("$JS.API.CONSUMER.>", {
      callback: (_e, m) => {
        const op = m.subject.split(".")[3];
        // INFO: each takeover's first request, and the looks of readers not served at once (consumer-takeover.md).
        if (op === "INFO" || op === "UNPIN" || op === "RESET") tally(takeovers, `${step} ${op}`);
      },
    });
    await nc.flush();
    mqttPort = await freePort();
    config = { mqtt: { listen: `127.0.0.1:${mqttPort}` }, log: { level: "info", format: "json" } };
    gw = await startGateway({ nats: nats.url, config });
  });
  afterAll(async () => {
    ending = true;
    nats?.process.kill("SIGCONT");
    for (const d of devices) d?.socket.destroy();
    await nc?.close();
    await gw?.stop();
    await nats?.stop();
  });

  /**
   * A device that comes back as devices do: CONNECT, and again after a refusal or a close,
   * until it is in; while nothing listens (the gateway restarting) it tries again with backoff.
   */
  async function resume(i: number, first = false): Promise<void> {
    let backoffMs = 100;
    for (;;) {
      if (ending) return;
      const c = await RawMqtt.open(mqttPort, version(i)).catch(() => undefined);
      if (!c) {
        await sleep(backoffMs * (0.5 + Math.random()));
        backoffMs = Math.min(backoffMs * 2, 2_000);
        continue;
      }
      c.socket.on("data", () => take(i, c));
      c.send({
        cmd: "connect",
        protocolId: "MQTT",
        protocolVersion: version(i),
        clientId: `fleet-${i}`,
        clean: false,
        keepalive: 60,
        ...(version(i) === 5 ? { properties: { sessionExpiryInterval: 3600 } } : {}),
      } as mqtt.Packet);
      const ack = (await c.next("connack", 30_000).catch(() => undefined)) as mqtt.IConnackPacket | undefined;
      if (ack && !ack.returnCode && !ack.reasonCode) {
        if (!first && !ack.sessionPresent) presentZero.push(`${step}:${i}`);
        devices[i] = c;
        inThisStep.add(i);
        advance();
        c.socket.once("close", () => {
          if (devices[i] !== c || ending) return;
          tally(
            closedByGateway,
            `${step} ${(c.packets.find((p) => p.cmd === "disconnect") as mqtt.IDisconnectPacket | undefined)?.reasonCode ?? "closed"}`,
          );
          void resume(i);
        });
        return;
      }
      // Refused (the gateway answers 0x88 only after waiting for its store), closed, or no
      // CONNACK within 30 s: the device tries again at once.
      tally(refusals, `${step} connack ${ack ? (ack.reasonCode ?? ack.returnCode) : "none"}`);
      c.socket.destroy();
    }
  }

  /** Takes a device's PUBLISHes and acknowledges each. */
  function take(i: number, c: RawMqtt): void {
    for (
      let k = c.packets.findIndex((p) => p.cmd === "publish");
      k >= 0;
      k = c.packets.findIndex((p) => p.cmd === "publish")
    ) {
      const p = c.packets.splice(k, 1)[0] as mqtt.IPublishPacket;
      const payload = p.payload.toString();
      const seen = received[i]!.get(payload) ?? { copies: 0, dups: 0 };
      seen.copies++;
      if (p.dup) seen.dups++;
      if (seen.copies > 1) tally(again, `${step} ${p.dup ? "DUP" : "not DUP"}`);
      received[i]!.set(payload, seen);
      if (p.qos === 1)
        c.send({
          cmd: "puback",
          messageId: p.messageId,
          ...(version(i) === 5 ? { reasonCode: 0 } : {}),
        } as mqtt.Packet);
    }
  }

  /** Subscribes a device to both filters, asking again (both) while the gateway refuses one. */
  async function subscribe(i: number): Promise<void> {
    for (let id = 1; ; id++) {
      const d = devices[i]!;
      d.send({
        cmd: "subscribe",
        messageId: id,
        subscriptions: [
          { topic: `dev/${i}/cmd`, qos: 1 },
          { topic: "fleet/all/#", qos: 1 },
        ],
      } as mqtt.Packet);
      const ack = (await d.next("suback", 30_000).catch(() => undefined)) as mqtt.ISubackPacket | undefined;
      if (ack?.granted.every((g) => g === 1)) return advance();
      tally(refusals, `${step} suback ${ack ? ack.granted.join(",") : "none"}`);
      // A closed connection comes back by itself (resume on close): wait for it.
      if (!ack)
        await eventually(() => (devices[i] && !devices[i]!.closed ? true : undefined), 60_000, `device ${i} back`);
    }
  }

  function advance(): void {
    progress++;
    for (const m of [...moments])
      if (progress >= m.at) {
        moments.splice(moments.indexOf(m), 1);
        m.reached();
      }
  }

  /** nats-server stops answering for longer than a request's timeout once `at` devices of the step are done. */
  async function stall(at: number): Promise<void> {
    if (progress < at) await new Promise<void>((reached) => moments.push({ at, reached }));
    nats.process.kill("SIGSTOP");
    await sleep(STALL_MS);
    nats.process.kill("SIGCONT");
  }

  /** Every device drops its connection (no DISCONNECT), as when their network goes. */
  function allAway(): void {
    for (const d of devices.splice(0)) d?.socket.destroy();
  }

  function begin(name: string): number {
    step = name;
    inThisStep = new Set();
    progress = 0;
    return performance.now();
  }

  /** A message to all (fleet/all/<tag>) and one to each (dev/<i>/cmd), QoS 1, through the gateway. */
  async function publish(tag: string, each: boolean): Promise<void> {
    const publisher = await connectMqtt(mqttPort, { protocolVersion: 5 });
    await publisher.publishAsync(`fleet/all/${tag}`, `all-${tag}`, { qos: 1 });
    for (const s of sent) s.add(`all-${tag}`);
    if (each)
      for (let i = 0; i < N; i++) {
        await publisher.publishAsync(`dev/${i}/cmd`, `${tag}-${i}`, { qos: 1 });
        sent[i]!.add(`${tag}-${i}`);
      }
    await publisher.endAsync();
  }

  /** Every device in and present, every message it was sent received once and nothing else, 2N consumers. */
  async function expectWhole(what: string): Promise<void> {
    const t0 = performance.now();
    const since = () => Math.round(performance.now() - t0);
    await eventually(
      () => (inThisStep.size === N && devices.every((d) => d && !d.closed) ? true : undefined),
      90_000,
      `${what}: every device back`,
    ).catch((e: Error) => {
      throw new Error(`${e.message}: ${inThisStep.size} in; ${report()}`);
    });
    expect(presentZero, `${what}: sessions back without their session`).toEqual([]);
    const back = since();
    // A delivery later than 10 s is reported with what its consumer looked like then (seen: ~30 s, rarely).
    const slow = setTimeout(() => {
      const first = received.findIndex((r, i) => [...sent[i]!].some((p) => !r.has(p)));
      const missing = [...sent[first]!].filter((p) => !received[first]!.has(p));
      void consumerState(missing.some((p) => p.startsWith("all-")) ? "fleet.all" : `dev.${first}.cmd`, first).then(
        (state) => late.push(`${what}: device ${first} without ${missing.join(",")} at +10 s: ${state}`),
      );
    }, 10_000);
    await eventually(
      () => (received.every((r, i) => [...sent[i]!].every((p) => r.has(p))) ? true : undefined),
      60_000,
      `${what}: every message delivered`,
    )
      .catch(async (e: Error) => {
        const missing = received.flatMap((r, i) => [...sent[i]!].filter((p) => !r.has(p)).map((p) => `${i}:${p}`));
        const first = received.findIndex((r, i) => [...sent[i]!].some((p) => !r.has(p)));
        throw new Error(
          `${e.message}; missing ${missing.length}: ${missing.slice(0, 20).join(", ")}; device ${first}'s dev consumer: ${await consumerState(`dev.${first}.cmd`, first)}; ${report()}`,
        );
      })
      .finally(() => clearTimeout(slow));
    const delivered = since();
    const unmarkedAgain = received.flatMap((r, i) =>
      [...r].filter(([, s]) => s.copies - s.dups > 1).map(([p, s]) => `${i}:${p}x${s.copies}`),
    );
    expect(unmarkedAgain, `${what}: a message twice, the second not marked DUP`).toEqual([]);
    const strays = received.flatMap((r, i) => [...r.keys()].filter((p) => !sent[i]!.has(p)).map((p) => `${i}:${p}`));
    expect(strays, `${what}: messages a device was not sent`).toEqual([]);
    // What a timed-out create or delete left goes with the session's own work.
    await eventually(
      async () => ((await storeConsumers(jsm)).length === 2 * N ? true : undefined),
      30_000,
      `${what}: ${2 * N} consumers`,
    ).catch(async (e: Error) => {
      throw new Error(`${e.message}: ${(await storeConsumers(jsm)).length}; ${await extraConsumers()}; ${report()}`);
    });
    timings.push(`[${what}: all back +${back} ms, all delivered +${delivered} ms, ${2 * N} consumers +${since()} ms]`);
  }

  /** Device `i`'s consumer reading `subject`, as its record names it and the server has it. */
  async function consumerState(subject: string, i: number): Promise<string> {
    const record = await (await new Kvm(nc).open("MQGW_SESSIONS")).get(Buffer.from(`fleet-${i}`).toString("base64url"));
    const names = new Set(
      (record?.json<{ subscriptions: Array<{ consumer?: string }> }>().subscriptions ?? []).map((s) => s.consumer),
    );
    const found: string[] = [`record revision ${record?.revision} names ${[...names].join(",")}`];
    for await (const c of jsm.consumers.list("MQGW_MSGS"))
      if (
        names.has(c.name) &&
        (c.config.filter_subjects ?? [c.config.filter_subject]).some((f) => f?.includes(subject))
      )
        found.push(
          JSON.stringify({
            name: c.name,
            delivered: c.delivered,
            acked: c.ack_floor,
            pending: c.num_pending,
            unacked: c.num_ack_pending,
            waiting: c.num_waiting,
            pin: c.priority_groups,
          }),
        );
    return found.join(" ");
  }

  /** The filters read by more than one consumer, with those consumers' names, creation and state. */
  async function extraConsumers(): Promise<string> {
    const byFilter = new Map<string, string[]>();
    for await (const c of jsm.consumers.list("MQGW_MSGS")) {
      const f = (c.config.filter_subjects ?? [c.config.filter_subject]).join(",");
      byFilter.set(f, [
        ...(byFilter.get(f) ?? []),
        `${c.name} ${c.created} delivered ${c.delivered.stream_seq} acked ${c.ack_floor.stream_seq} waiting ${c.num_waiting}`,
      ]);
    }
    const extra = [...byFilter].filter(([f, cs]) => cs.length > (f.includes("fleet") ? N : 1));
    return `filters read by more consumers than sessions: ${extra
      .map(([f, cs]) => (f.includes("fleet") ? `${f}: ${cs.length}` : `${f}: ${cs.join(" / ")}`))
      .join("; ")}`;
  }

  function report(): string {
    const warned = [...new Set(gw.logs.filter((l) => (l.level as number) >= 40).map((l) => `${l.msg} ${l.err ?? ""}`))];
    return [
      `refusals ${JSON.stringify(Object.fromEntries(refusals))}`,
      `closed by the gateway ${JSON.stringify(Object.fromEntries(closedByGateway))}`,
      `takeover requests ${JSON.stringify(Object.fromEntries(takeovers))}`,
      `second copies ${JSON.stringify(Object.fromEntries(again))}`,
      `late deliveries: ${late.join(" | ") || "none"}`,
      `pins handed back ${handedBack + handedBackBy(gw)}`,
      `the gateway warned: ${warned.slice(0, 15).join(" | ")}`,
    ].join("; ");
  }

  /** The account's consumer INFO, UNPIN or RESET requests during this step. */
  const takeoverRequests = (op: "INFO" | "UNPIN" | "RESET") => takeovers.get(`${step} ${op}`) ?? 0;
  const parked = () => metric(gw, "mqgw_actors", { machine: "storedDelivery", state: "active.read.parked" });

  it("every session comes back present after every phase, gets each message once, and leaves no consumer behind", {
    timeout: 300_000,
  }, async () => {
    // 1: all connect, 50 at a time, then all subscribe at once. nats-server stalls once a third
    // are in, and once a tenth are subscribed: the rest wait for their records and consumers,
    // SUBSCRIBEs are refused (asked again), and creates the gateway gave up on may still be
    // carried out by the server.
    let t0 = begin("connect");
    let stalled = stall(N / 3);
    let next = 0;
    await Promise.all(
      Array.from({ length: CONNECT_IN_FLIGHT }, async () => {
        while (next < N) await resume(next++, true);
      }),
    );
    await stalled;
    // Counted from here: the subscribed (every device is in already).
    step = "subscribe";
    progress = 0;
    // Early: the consumers' creates (two a device) are still under way; later it may find only record writes.
    stalled = stall(N / 10);
    await Promise.all(Array.from({ length: N }, (_, i) => subscribe(i)));
    await stalled;
    await expectWhole("connect + subscribe");
    timings.push(`connect + subscribe ${Math.round(performance.now() - t0)} ms`);

    // 2: reconnect storms; the stall lands with the first CONNECTs, once a third are back, once two thirds are.
    // A resume that finds its record as its connection's end wrote it adopts the parked
    // readers; one the stall kept from that (the record still the connected one, or another
    // connection's since) takes its consumers over: which, each storm's timing decides.
    for (const at of [0, N / 3, (2 * N) / 3]) {
      t0 = begin(`storm, stall at ${at} back`);
      allAway();
      await Promise.all([...Array.from({ length: N }, (_, i) => resume(i)), stall(at)]);
      await expectWhole(step);
      timings.push(`${step} ${Math.round(performance.now() - t0)} ms`);
    }

    // 3: offline messages (one to all, one to each, sent while all are away, every reader
    // parked). The first comes to readers nothing was delivered to (their parked pulls, or
    // the adopted reader's next, are pinned by it); it delivers to every reader and the
    // devices acknowledge all, so the next ones come to pinned readers. The resumes, within
    // the 20 s the readers are kept, adopt them: no INFO, UNPIN or RESET for most.
    const offline: Array<[string, number, string]> = [
      ["a", N / 3, "never pinned"],
      ["b", 0, "pinned"],
      ["c", N / 2, "pinned"],
    ];
    for (const [tag, at, readers] of offline) {
      t0 = begin(`offline message ${tag} (readers ${readers}, parked), stall at ${at} back`);
      allAway();
      await eventually(
        async () => ((await parked()) === 2 * N ? true : undefined),
        15_000,
        `${step}: every reader parked`,
      ).catch(async (e: Error) => {
        throw new Error(`${e.message}: ${await parked()}; ${report()}`);
      });
      await publish(tag, true);
      await Promise.all([...Array.from({ length: N }, (_, i) => resume(i)), stall(at)]);
      await expectWhole(step);
      expect(
        takeoverRequests("INFO") + takeoverRequests("UNPIN") + takeoverRequests("RESET"),
        `${step}: readers adopted`,
      ).toBeLessThan(2 * N);
      timings.push(`${step} ${Math.round(performance.now() - t0)} ms`);
    }

    // 5: the gateway restarts (SIGTERM, the same config and ports); every device comes back
    // with backoff. The stall lands on the stopping gateway's last writes (its detached
    // records), or once a third are back on the new one. Then a live message to all.
    for (const [name, atStop] of [
      ["restart, stall as it stops", true],
      ["restart, stall once a third are back", false],
    ] as const) {
      t0 = begin(name);
      const stalling = atStop ? stall(0) : undefined;
      await gw.stop();
      // Whoever got in before the old gateway was gone is out again: counted from here.
      begin(name);
      const stalled = stalling ?? stall(N / 3);
      handedBack += handedBackBy(gw);
      gw = await startGateway({ nats: nats.url, config });
      await stalled;
      await expectWhole(name);
      expect(takeoverRequests("INFO"), `${step}: a takeover per reader`).toBeGreaterThanOrEqual(2 * N);
      await publish(atStop ? "live-1" : "live-2", false);
      await expectWhole(`${name}: the live message`);
      timings.push(`${step} ${Math.round(performance.now() - t0)} ms`);
    }

    console.log(`sessionFleet (N=${N}): ${timings.join(", ")}; ${report()}`);
  });
});
