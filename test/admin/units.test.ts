// The admin machines and reply builders on their own: timers on a simulated clock, client
// handles as the registry holds them. What a real connection does is in the other files.
import { Effect } from "effect";
import { describe, expect, it } from "vitest";
import { SimulatedClock } from "xstate";
import { infoReply } from "../../src/actors/admin/info.js";
import { type KickReply, kickActor, kickTarget } from "../../src/actors/admin/kick.js";
import { LIST_MAX_CLIENTS, listReply } from "../../src/actors/admin/list.js";
import { parseAdminSubject } from "../../src/actors/admin/subjects.js";
import { type ClientHandle, ClientRegistry } from "../../src/actors/clients.js";
import { startChildMachine } from "../../src/actors/machineActor.js";
import { ActorRegistry } from "../../src/actors/registry.js";
import { adminConnectionMachine } from "../../src/machines/adminConnection.js";
import { adminKickMachine } from "../../src/machines/adminKick.js";
import { lameDuckMachine } from "../../src/machines/adminLameDuck.js";

function handle(cid: number, fields: Partial<ClientHandle> = {}, onKick = () => {}): ClientHandle {
  return {
    cid,
    protocol: "mqtt",
    clientId: `c${cid}`,
    remote: `127.0.0.1:${10_000 + cid}`,
    since: new Date(Date.UTC(2026, 0, 1, 0, 0, cid)),
    account: "A",
    natsServer: () => "n1",
    kick: onKick,
    shutdown: () => {},
    takeOver: () => {},
    ...fields,
  };
}

describe("parseAdminSubject", () => {
  it.each([
    ["$MQG.admin.server.gw-1.info", { scope: { kind: "server" }, op: "info" }],
    ["$MQG.admin.ping.list", { scope: { kind: "ping" }, op: "list" }],
    ["$MQG.admin.account.PLANT_A.kick", { scope: { kind: "account", account: "PLANT_A" }, op: "kick" }],
    ["$MQG.admin.server.gw-1.a.b", { scope: { kind: "server" }, op: "a.b" }],
  ])("%s", (subject, expected) => {
    expect(parseAdminSubject(subject)).toEqual(expected);
  });
  it.each(["$MQG.admin.server.gw-1", "$MQG.admin.other.x", "$MQG.alive.gw-1", "orders.eu"])("not %s", (subject) => {
    expect(parseAdminSubject(subject)).toBeUndefined();
  });
});

describe("list", () => {
  const many = (n: number) => Array.from({ length: n }, (_, i) => handle(i + 1));

  it("stops before the reply outgrows max_payload, and says so", () => {
    const clients = many(100);
    const full = JSON.stringify(listReply("gw", clients, undefined, 1 << 20)).length;
    const reply = listReply("gw", clients, undefined, Math.floor(full / 2));
    expect(reply.count).toBe(100);
    expect(reply.truncated).toBe(true);
    expect(reply.clients.length).toBeGreaterThan(40);
    expect(reply.clients.length).toBeLessThan(55);
    expect(Buffer.byteLength(JSON.stringify(reply))).toBeLessThanOrEqual(Math.floor(full / 2));
    // One more entry would not have fit.
    const oneMore = {
      ...reply,
      clients: clients
        .slice(0, reply.clients.length + 1)
        .map((c) => listReply("gw", [c], undefined, 1 << 20).clients[0]),
    };
    expect(Buffer.byteLength(JSON.stringify(oneMore))).toBeGreaterThan(Math.floor(full / 2));
  });

  it("holds at most 10,000 clients", () => {
    const reply = listReply("gw", many(LIST_MAX_CLIENTS + 5), undefined, 64 << 20);
    expect(reply.clients).toHaveLength(LIST_MAX_CLIENTS);
    expect(reply).toMatchObject({ count: LIST_MAX_CLIENTS + 5, truncated: true });
  });

  it("filters by account and writes since as RFC 3339", () => {
    const reply = listReply("gw", [handle(1), handle(2, { account: "B" })], "B", 1 << 20);
    expect(reply).toEqual({
      id: "gw",
      clients: [
        {
          cid: 2,
          account: "B",
          protocol: "mqtt",
          client_id: "c2",
          remote: "127.0.0.1:10002",
          since: "2026-01-01T00:00:02.000Z",
          nats_server: "n1",
        },
      ],
      count: 1,
      truncated: false,
    });
  });
});

describe("info", () => {
  it("counts per account and protocol; the account scope names its account alone", () => {
    const clients = [handle(1), handle(2, { protocol: "amqp" }), handle(3, { account: "B" })];
    const gateway = { id: "gw", version: "1.0.0", since: new Date(0) };
    expect(infoReply(gateway, { kind: "ping" }, clients, ["A", "C"]).accounts).toEqual({
      A: { mqtt: 1, amqp: 1 },
      B: { mqtt: 1, amqp: 0 },
      C: { mqtt: 0, amqp: 0 },
    });
    expect(infoReply(gateway, { kind: "account", account: "B" }, clients, ["A"]).accounts).toEqual({
      B: { mqtt: 1, amqp: 0 },
    });
  });
});

describe("kick", () => {
  it.each([
    [{ kind: "server" }, { cid: 3 }, { kind: "target", target: { cid: 3 } }],
    [{ kind: "account", account: "A" }, { cid: 3 }, { kind: "refused" }],
    [
      { kind: "account", account: "A" },
      { client_id: "x" },
      { kind: "target", target: { clientId: "x", account: "A" } },
    ],
    [{ kind: "account", account: "A" }, { client_id: "x", account: "B" }, { kind: "refused" }],
    [{ kind: "server" }, { client_id: "x" }, { kind: "refused" }],
    [{ kind: "server" }, { client_id: "x", account: "" }, { kind: "target", target: { clientId: "x", account: "" } }],
    [{ kind: "server" }, { cid: 1, client_id: "x" }, { kind: "error" }],
    [{ kind: "server" }, {}, { kind: "error" }],
    [{ kind: "server" }, { cid: -1 }, { kind: "error" }],
  ] as const)("%j %j", (scope, body, expected) => {
    expect(kickTarget(scope, body, "$MQG.admin.server.gw")).toMatchObject(expected);
  });

  const run = (registry: ClientRegistry, target: Parameters<typeof kickActor>[0], timeoutMs = 1_000) =>
    new Promise<KickReply>((resolve) => {
      Effect.runFork(
        Effect.scoped(kickActor(target, { clients: registry, registry: new ActorRegistry(), timeoutMs }, resolve)),
      );
    });

  it("several connections with the client id: not kicked, and the reason lists their cids", async () => {
    const registry = new ClientRegistry();
    const kicked: number[] = [];
    for (const cid of [7, 3])
      registry.add(handle(cid, { protocol: "amqp", clientId: "shared" }, () => kicked.push(cid)));
    expect(await run(registry, { clientId: "shared", account: "A" })).toEqual({
      kicked: false,
      reason: expect.stringContaining("cids 3, 7"),
    });
    expect(kicked).toEqual([]);
  });

  it("kicked once the connection has left the registry; failed when it does not leave in time", async () => {
    const registry = new ClientRegistry();
    const leaves: ClientHandle = handle(1, {}, () => queueMicrotask(() => registry.remove(leaves)));
    registry.add(leaves);
    registry.add(handle(2));
    expect(await run(registry, { cid: 1 })).toEqual({ kicked: true, cid: 1 });
    expect(await run(registry, { cid: 2 }, 50)).toEqual({
      kicked: false,
      reason: expect.stringMatching(/still connected after 50 ms/),
    });
    expect(await run(registry, { cid: 9 })).toEqual({ kicked: false, reason: "no client with cid 9 on this gateway" });
  });

  it("the machine: found -> kicking -> failed after its timeout", () => {
    const clock = new SimulatedClock();
    const emitted: string[] = [];
    const { actor } = startChildMachine(adminKickMachine, {
      input: { timeoutMs: 5_000 },
      clock,
      onEmit: (e) => emitted.push(e.type),
    });
    actor.send({ type: "FOUND", cid: 4 });
    expect(actor.getSnapshot().value).toBe("kicking");
    clock.increment(4_999);
    expect(actor.getSnapshot().value).toBe("kicking");
    clock.increment(1);
    expect(actor.getSnapshot().value).toBe("failed");
    expect(emitted).toEqual(["kick", "failed"]);
  });
});

describe("lame duck machine", () => {
  it("asks one client now and the rest evenly over the window, then waits for them", () => {
    const clock = new SimulatedClock();
    const asked: number[] = [];
    const { actor } = startChildMachine(lameDuckMachine, {
      input: { clients: 4, overMs: 1_000, graceMs: 5_000 },
      clock,
      on: { close_next: () => asked.push(clock.now()), timed_out: () => asked.push(-1) },
    });
    for (let t = 0; t < 1_000; t += 50) clock.increment(50);
    expect(asked).toEqual([0, 250, 500, 750]);
    expect(actor.getSnapshot().value).toBe("waiting");
    actor.send({ type: "CLIENTS_GONE" });
    expect(actor.getSnapshot().value).toBe("drained");
  });

  it("with no clients it is drained at once; clients that outstay the grace time it out", () => {
    const { actor: none } = startChildMachine(lameDuckMachine, {
      input: { clients: 0, overMs: 1_000, graceMs: 5_000 },
    });
    expect(none.getSnapshot().value).toBe("drained");
    const clock = new SimulatedClock();
    const { actor: stuck } = startChildMachine(lameDuckMachine, {
      input: { clients: 1, overMs: 1_000, graceMs: 5_000 },
      clock,
    });
    clock.increment(5_000);
    expect(stuck.getSnapshot().value).toBe("timedOut");
  });
});

describe("admin connection machine", () => {
  it("serves, goes down and back with the client library, retries a refused user with backoff", () => {
    const clock = new SimulatedClock();
    const emitted: string[] = [];
    const { actor } = startChildMachine(adminConnectionMachine, {
      input: undefined,
      clock,
      onEmit: (e) => emitted.push(e.type),
    });
    actor.send({ type: "CONNECT_FAILED", reason: "Authorization Violation", auth: true });
    expect(actor.getSnapshot().value).toBe("refused");
    clock.increment(1_000);
    expect(actor.getSnapshot().value).toBe("connecting");
    actor.send({ type: "CONNECT_FAILED", reason: "Authorization Violation", auth: true });
    clock.increment(1_999);
    expect(actor.getSnapshot().value).toBe("refused");
    clock.increment(1);
    actor.send({ type: "CONNECTED", account: "ADMIN", server: "n1" });
    expect(actor.getSnapshot().matches("serving")).toBe(true);
    actor.send({ type: "SUBSCRIBE_REFUSED", subject: "$MQG.admin.account.A.>", reason: "Permissions Violation" });
    expect(actor.getSnapshot().context.refusedSubjects).toEqual(["$MQG.admin.account.A.>"]);
    actor.send({ type: "DISCONNECTED" });
    expect(actor.getSnapshot().value).toEqual({ down: "reconnecting" });
    actor.send({ type: "RECONNECTED", server: "n2" });
    expect(actor.getSnapshot().value).toBe("serving");
    actor.send({ type: "CLOSED", reason: "gone" });
    expect(actor.getSnapshot().value).toEqual({ down: "retrying" });
    expect(emitted).toEqual([
      "connect",
      "warn",
      "connect",
      "warn",
      "connect",
      "subscribe",
      "serving",
      "warn",
      "warn",
      "serving",
      "warn",
    ]);
  });
});
