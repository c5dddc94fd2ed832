// The store ops' machines and reply builders on their own: timers on a simulated clock,
// client handles as the registry holds them. Real NATS and gateways: test/cli/ctlStore.test.ts.
import { describe, expect, it } from "vitest";
import { SimulatedClock } from "xstate";
import { retainedSubjects } from "../../src/actors/admin/retainedOps.js";
import { subscriptionsReply } from "../../src/actors/admin/subscriptionsOp.js";
import type { ClientHandle } from "../../src/actors/clients.js";
import { startChildMachine } from "../../src/actors/machineActor.js";
import { adminSessionDropMachine } from "../../src/machines/adminSessionDrop.js";
import { adminStoreRequestMachine } from "../../src/machines/adminStoreRequest.js";

function handle(cid: number, account: string, filters: string[]): ClientHandle {
  return {
    cid,
    protocol: "mqtt",
    clientId: `c${cid}`,
    remote: `127.0.0.1:${10_000 + cid}`,
    since: new Date(),
    account,
    natsServer: () => "n1",
    subscriptionList: () => filters.map((filter) => ({ filter, qos: 1 })),
    kick: () => {},
    shutdown: () => {},
    takeOver: () => {},
  };
}

describe("subscriptions", () => {
  const clients = [handle(2, "B", ["b/#"]), handle(1, "A", ["a/1", "a/2"]), handle(3, "A", [])];

  it("lists each client's filters, oldest connection first, by account and client id", () => {
    expect(subscriptionsReply("gw", clients, { account: undefined, clientId: undefined }, 1 << 20)).toEqual({
      id: "gw",
      subscriptions: [
        { cid: 1, account: "A", protocol: "mqtt", client_id: "c1", filter: "a/1", qos: 1 },
        { cid: 1, account: "A", protocol: "mqtt", client_id: "c1", filter: "a/2", qos: 1 },
        { cid: 2, account: "B", protocol: "mqtt", client_id: "c2", filter: "b/#", qos: 1 },
      ],
      count: 3,
      truncated: false,
    });
    expect(subscriptionsReply("gw", clients, { account: "B", clientId: undefined }, 1 << 20)).toMatchObject({
      count: 1,
    });
    expect(subscriptionsReply("gw", clients, { account: undefined, clientId: "c1" }, 1 << 20)).toMatchObject({
      count: 2,
    });
  });

  it("stops before the reply outgrows max_payload, and says so", () => {
    const reply = subscriptionsReply("gw", clients, { account: undefined, clientId: undefined }, 200) as {
      subscriptions: unknown[];
      count: number;
      truncated: boolean;
    };
    expect(reply).toMatchObject({ count: 3, truncated: true });
    expect(reply.subscriptions.length).toBeLessThan(3);
    expect(Buffer.byteLength(JSON.stringify(reply))).toBeLessThanOrEqual(200);
  });
});

describe("retained filters", () => {
  it.each([
    ["plant/+/temp", ["$MQG.retained.plant.*.temp"]],
    ["plant/#", ["$MQG.retained.plant.>", "$MQG.retained.plant"]],
    ["#", ["$MQG.retained.>"]],
    ["plant/line1/temp", ["$MQG.retained.plant.line1.temp"]],
  ])("%s reads %j", (filter, subjects) => {
    expect(retainedSubjects(filter)).toEqual({ ok: true, subjects });
  });
  it.each(["$share/g/plant/#", "a/#/b", ""])("%j is refused", (filter) => {
    expect(retainedSubjects(filter).ok).toBe(false);
  });
});

describe("adminStoreRequest", () => {
  it("answers once: with the reply, or with the failure when NATS does not answer in time", () => {
    const clock = new SimulatedClock();
    const emitted: string[] = [];
    const { actor } = startChildMachine(adminStoreRequestMachine, {
      input: { timeoutMs: 10_000 },
      clock,
      onEmit: (e) => emitted.push(e.type),
    });
    clock.increment(9_999);
    expect(actor.getSnapshot().value).toBe("asking");
    clock.increment(1);
    expect(actor.getSnapshot().value).toBe("failed");
    actor.send({ type: "ANSWERED", reply: {} });
    expect(emitted).toEqual(["ask", "failed"]);
  });
});

describe("adminSessionDrop", () => {
  const run = () => {
    const clock = new SimulatedClock();
    const emitted: Array<Record<string, unknown>> = [];
    const { actor } = startChildMachine(adminSessionDropMachine, {
      input: { timeoutMs: 10_000 },
      clock,
      onEmit: (e) => emitted.push({ ...e }),
    });
    return { clock, emitted, actor };
  };

  it("a connected session: the client is let go where it is, then the session is deleted", () => {
    const { emitted, actor } = run();
    actor.send({ type: "FOUND", owner: "gw-b" });
    actor.send({ type: "KICKED" });
    actor.send({ type: "DELETED", consumers: 2 });
    expect(emitted).toEqual([
      { type: "read" },
      { type: "kick", owner: "gw-b" },
      { type: "delete" },
      { type: "dropped", kicked: "gw-b", consumers: 2 },
    ]);
  });

  it("a detached one is deleted at once; a missing one, or a step without answer, fails", () => {
    const detached = run();
    detached.actor.send({ type: "FOUND", owner: undefined });
    expect(detached.emitted.map((e) => e.type)).toEqual(["read", "delete"]);

    const missing = run();
    missing.actor.send({ type: "NOT_FOUND" });
    expect(missing.emitted.at(-1)).toEqual({ type: "failed", reason: "no such session" });

    const stuck = run();
    stuck.actor.send({ type: "FOUND", owner: "gw-c" });
    stuck.clock.increment(10_000);
    expect(stuck.emitted.at(-1)).toEqual({
      type: "failed",
      reason: "letting the client go: no answer within 10000 ms",
    });
  });
});
