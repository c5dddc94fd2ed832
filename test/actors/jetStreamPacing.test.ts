// The gateway's JetStream API and KV requests of one account are paced (issue 24): at most
// `limit` reach nats-server at once, the rest wait in order, and one that cannot be sent
// within its timeout is answered as timed out without ever reaching the server.
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect, type Msg, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JetStreamApiPacer, pacedRequests } from "../../src/actors/client/jetStreamPacing.js";
import { isTimeout } from "../../src/actors/client/storedWrite.js";
import { type NatsServerHandle, startNatsServer } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";

const decode = (m: Msg) => new TextDecoder().decode(m.data);

describe("JetStream API requests paced per account", () => {
  let nats: NatsServerHandle;
  let nc: NatsConnection;
  let server: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url, noAsyncTraces: true });
    server = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await server?.close();
    await nats?.stop();
  });

  /** A responder on `subject` that keeps what it was asked; `answer` replies to the oldest kept. */
  async function responder(subject: string) {
    const held: Msg[] = [];
    const seen: string[] = [];
    let most = 0;
    server.subscribe(subject, {
      callback: (_e, m) => {
        held.push(m);
        seen.push(decode(m));
        most = Math.max(most, held.length);
      },
    });
    await server.flush();
    return {
      seen,
      held: () => held.length,
      most: () => most,
      answer: (n = held.length) => {
        for (const m of held.splice(0, n)) m.respond(m.data);
      },
    };
  }

  it("never has more than `limit` requests at the server, and sends the rest in order, all answered", async () => {
    const r = await responder("api.order");
    const paced = pacedRequests(nc, new JetStreamApiPacer(16));
    const answers = Array.from({ length: 400 }, (_, i) => paced.request("api.order", String(i), { timeout: 30_000 }));
    // The server answers whatever reached it, in turns, until all 400 were answered.
    const all = Promise.all(answers);
    let done = false;
    void all.then(() => {
      done = true;
    });
    await eventually(() => {
      r.answer();
      expect(done).toBe(true);
      return true;
    });
    expect((await all).map(decode)).toEqual(answers.map((_, i) => String(i)));
    expect(r.seen).toEqual(answers.map((_, i) => String(i)));
    expect(r.most()).toBeLessThanOrEqual(16);
    expect(r.most()).toBeGreaterThan(1);
  });

  it("answers a request not sent within its timeout as timed out, and the server never sees it", async () => {
    const r = await responder("api.late");
    const pacer = new JetStreamApiPacer(1);
    const paced = pacedRequests(nc, pacer);
    const first = paced.request("api.late", "first", { timeout: 30_000 });
    await eventually(() => expect(r.held()).toBe(1));
    const late = paced.request("api.late", "late", { timeout: 200 }).catch((e: unknown) => e);
    expect(isTimeout(await late)).toBe(true);
    r.answer();
    expect(decode(await first)).toBe("first");
    // The slot is free again: the next one goes through; "late" was never sent.
    const next = paced.request("api.late", "next", { timeout: 30_000 });
    await eventually(() => expect(r.held()).toBe(1));
    r.answer();
    expect(decode(await next)).toBe("next");
    expect(r.seen).toEqual(["first", "next"]);
    expect(pacer.queued).toBe(0);
  });

  it("answers at once as timed out past its bound of waiting requests", async () => {
    const r = await responder("api.full");
    const paced = pacedRequests(nc, new JetStreamApiPacer(1, 2));
    const kept = ["a", "b", "c"].map((p) => paced.request("api.full", p, { timeout: 30_000 }));
    const refused = await paced.request("api.full", "d", { timeout: 30_000 }).catch((e: unknown) => e);
    expect(isTimeout(refused)).toBe(true);
    await eventually(() => {
      r.answer();
      expect(r.seen).toEqual(["a", "b", "c"]);
      return true;
    });
    expect((await Promise.all(kept)).map(decode)).toEqual(["a", "b", "c"]);
  });

  it("sends a waiting KV request (a session record a CONNECT waits for) before JetStream API requests that waited longer", async () => {
    const api = await responder("$JS.API.CONSUMER.INFO.LANES.*");
    const records = await responder("$KV.LANES.*");
    const paced = pacedRequests(nc, new JetStreamApiPacer(1));
    const sent: string[] = [];
    server.subscribe("$JS.API.CONSUMER.INFO.LANES.*", { callback: (_e, m) => sent.push(decode(m)) });
    server.subscribe("$KV.LANES.*", { callback: (_e, m) => sent.push(decode(m)) });
    await server.flush();
    const ask = (subject: string, payload: string) => paced.request(subject, payload, { timeout: 30_000 });
    const answers = [
      ask("$JS.API.CONSUMER.INFO.LANES.c0", "takeover 0"),
      ask("$JS.API.CONSUMER.INFO.LANES.c1", "takeover 1"),
      ask("$JS.API.CONSUMER.INFO.LANES.c2", "takeover 2"),
      ask("$KV.LANES.dev1", "record 1"),
      ask("$KV.LANES.dev2", "record 2"),
    ];
    // One at a time: each answer lets the next waiting request go.
    await eventually(() => {
      api.answer();
      records.answer();
      return sent.length === 5 ? true : undefined;
    });
    await Promise.all(answers);
    expect(sent).toEqual(["takeover 0", "record 1", "record 2", "takeover 1", "takeover 2"]);
  });

  it("holds requests while its connection is down (nats.js would drop them), sends them when it is back, and still times them out", async () => {
    const r = await responder("api.down");
    let status: "up" | "down" = "down";
    const listeners = new Set<(s: "up" | "down") => void>();
    const connection = {
      connected: () => status === "up",
      onStatus: (l: (s: "up" | "down") => void) => {
        listeners.add(l);
        return () => listeners.delete(l);
      },
    };
    const pacer = new JetStreamApiPacer(16);
    pacer.follow(connection);
    const paced = pacedRequests(nc, pacer);
    const late = paced.request("api.down", "late", { timeout: 200 }).then(
      () => "answered",
      (e) => (isTimeout(e) ? "timed out" : String(e)),
    );
    const held = Array.from({ length: 3 }, (_, i) => paced.request("api.down", String(i), { timeout: 30_000 }));
    expect(await late).toBe("timed out");
    await server.flush();
    await nc.flush();
    expect(r.seen).toEqual([]);
    expect(pacer.queued).toBe(3);

    status = "up";
    for (const l of listeners) l("up");
    await eventually(() => (r.held() === 3 ? true : undefined));
    r.answer();
    expect((await Promise.all(held)).map(decode)).toEqual(["0", "1", "2"]);
    // The one that timed out while held never reached the server.
    expect(r.seen).toEqual(["0", "1", "2"]);
  });

  it("is a connection JetStream and KV work through", async () => {
    const paced = pacedRequests(nc, new JetStreamApiPacer(2));
    const jsm = await jetstreamManager(paced);
    await jsm.streams.add({ name: "PACED", subjects: ["paced.>"] });
    const kv = await new Kvm(jetstream(paced)).create("PACED_KV");
    await Promise.all(Array.from({ length: 50 }, (_, i) => kv.put(`k${i}`, String(i))));
    const values = await Promise.all(Array.from({ length: 50 }, async (_, i) => (await kv.get(`k${i}`))?.string()));
    expect(values).toEqual(Array.from({ length: 50 }, (_, i) => String(i)));
    expect((await jsm.streams.info("PACED")).config.subjects).toEqual(["paced.>"]);
  });
});
