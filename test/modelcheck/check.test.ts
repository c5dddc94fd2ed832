import { describe, expect, it } from "vitest";
import { createMachine, emit } from "xstate";
import { amqpSenderLinkMachine } from "../../src/machines/amqpLink.js";
import { mqttConnectionMachine } from "../../src/machines/mqttConnection.js";
import { mqttSessionMachine } from "../../src/machines/mqttSession.js";
import { statechartsViewerMachine } from "../../src/machines/statechartsViewer.js";
import { check } from "../../src/modelcheck/check.js";
import { amqpSenderLinkModel } from "../../src/modelcheck/models/amqpLink.js";
import { models } from "../../src/modelcheck/models/index.js";
import { mqttConnectionModel } from "../../src/modelcheck/models/mqttConnection.js";
import { mqttSessionModels } from "../../src/modelcheck/models/mqttSession.js";
import { statechartsViewerModel } from "../../src/modelcheck/models/statechartsViewer.js";
import { runModelCheck } from "../../src/modelcheck/run.js";

/** A copy of a machine with some states replaced: the same guards, delays and actions. */
function withStates(
  machine: typeof mqttConnectionMachine | typeof statechartsViewerMachine,
  states: Record<string, unknown>,
) {
  const config = machine.config as { states: Record<string, unknown> };
  return createMachine({ ...config, states: { ...config.states, ...states } } as never).provide(
    machine.implementations as never,
  );
}

const eventTypes = (path: readonly { event: { type: string } }[]) => path.map((s) => s.event.type);

describe("model checking the machines", () => {
  it.each(models.map((m) => [m.name ?? m.machine.id, m] as const))("%s keeps every property", (_name, model) => {
    const report = check(model);
    expect(report.findings).toEqual([]);
    expect(report.states).toBeGreaterThan(0);
  });

  it("a will published after a normal DISCONNECT is caught, with the shortest way there", () => {
    // Broken on purpose: every DISCONNECT "asks for the will", as if 0x00 were 0x04.
    const broken = mqttConnectionMachine.provide({ guards: { asksForWill: () => true } });
    const report = check(mqttConnectionModel(broken));
    const finding = report.findings.find((f) => f.property === "no will after a normal DISCONNECT");
    expect(finding?.kind).toBe("invariant");
    expect(finding?.message).toBe("publish_will after DISCONNECT 0x00");
    // The will goes on its delay, or at once when a clean start ends the session (the same
    // length); the shortest CONNECT is one whose NATS access was known at once.
    expect(eventTypes(finding!.path).slice(0, 4)).toEqual(["xstate.init", "CONNECT", "SESSION_READY", "DISCONNECT"]);
    expect(finding!.path[1]?.event).toMatchObject({ nats: { account: "A" } });
    expect(eventTypes(finding!.path)).toHaveLength(5);
    expect(finding!.path.at(-1)).toMatchObject({ state: "publishingWill", emitted: ["publish_will"] });
    // The other properties still hold on the broken machine.
    expect(report.findings.map((f) => f.property)).toEqual(["no will after a normal DISCONNECT"]);
  });

  it("a lame duck that publishes the will is caught", () => {
    const broken = withStates(mqttConnectionMachine, {
      lameDuck: { ...(mqttConnectionMachine.config.states!.lameDuck as object), always: { target: "willPending" } },
    });
    const finding = check(mqttConnectionModel(broken)).findings.find(
      (f) => f.property === "no will when the gateway itself closes the connection",
    );
    expect(eventTypes(finding!.path).slice(0, 4)).toEqual(["xstate.init", "CONNECT", "SESSION_READY", "LAME_DUCK"]);
    expect(finding!.path.at(-1)).toMatchObject({ state: "publishingWill", emitted: ["publish_will"] });
  });

  it("a hand-off to the home worker after the CONNECT was acted on is caught", () => {
    // Broken on purpose: a connection that already asked NATS for the client's login hands off.
    const authenticating = mqttConnectionMachine.config.states!.authenticating as { on: object };
    const broken = withStates(mqttConnectionMachine, {
      authenticating: {
        ...authenticating,
        on: { ...authenticating.on, HAND_OFF: { target: "handedOff", actions: emit({ type: "hand_off", worker: 2 }) } },
      },
    });
    const finding = check(mqttConnectionModel(broken)).findings.find(
      (f) => f.property === "a connection handed to another worker acted on nothing of its CONNECT",
    );
    expect(finding?.message).toBe("handed off after acting on the CONNECT (HAND_OFF)");
    expect(eventTypes(finding!.path)).toEqual(["xstate.init", "CONNECT", "HAND_OFF"]);
  });

  it("an expired session served without being discarded is caught", () => {
    // Broken on purpose: only a clean start discards; an expired session is left in the bucket.
    const broken = mqttSessionMachine.provide({
      guards: { mustDiscard: ({ context }) => context.found.exists && context.cleanStart },
    });
    const model = mqttSessionModels().find((m) => m.name === "mqttSession (resume, expiry 3600 s)")!;
    const finding = check({ ...model, machine: broken }).findings.find((f) => f.kind === "invariant");
    expect(finding?.property).toBe("a stale session is discarded before the client is served");
    expect(finding!.path.map((s) => s.event)).toEqual([
      { type: "xstate.init" },
      { type: "CLAIMED" },
      { type: "LOADED", found: { exists: true, expired: true } },
    ]);
  });

  it("a viewer left congested without a timer is a progress violation", () => {
    const broken = withStates(statechartsViewerMachine, { congested: { on: { DRAINED: { target: "streaming" } } } });
    const finding = check(statechartsViewerModel(broken)).findings.find((f) => f.kind === "progress");
    expect(finding?.property).toBe("a viewer that stops reading is let go on a timer");
    expect(eventTypes(finding!.path)).toEqual(["xstate.init", "BLOCKED"]);
    expect(finding!.message).toContain("stuck in congested");
  });

  it("the command prints counts and the counter-example, and exits 1", () => {
    let out = "";
    const broken = mqttConnectionMachine.provide({ guards: { asksForWill: () => true } });
    const code = runModelCheck([mqttConnectionModel(broken)], ["mqttConnection", "someNewMachine"], (t) => {
      out += t;
    });
    expect(code).toBe(1);
    expect(out).toMatch(/^FAIL mqttConnection: \d+ states, \d+ transitions explored/m);
    expect(out).toContain("shortest counter-example (4 steps):");
    expect(out).toMatch(/ 3\. DISCONNECT \{"reasonCode":0\} -> willPending {2}emits detach_session, end_socket/);
    expect(out).toContain("note: no model for someNewMachine");
    expect(runModelCheck([mqttConnectionModel()], ["mqttConnection"], () => {})).toBe(0);
  });

  it("a link that ignores a fault while attaching is caught (the flag the edge kept before the machine did)", () => {
    const states = amqpSenderLinkMachine.config.states as Record<string, { on?: Record<string, unknown> }>;
    const { FAULT: _ignored, ...on } = states.attaching!.on!;
    const broken = createMachine({
      ...amqpSenderLinkMachine.config,
      states: { ...states, attaching: { ...states.attaching, on } },
    } as never).provide(amqpSenderLinkMachine.implementations as never);
    const finding = check(amqpSenderLinkModel(broken)).findings.find(
      (f) => f.property === "a fault while attaching refuses the attach",
    );
    expect(finding?.message).toBe("attach after a fault while attaching");
    expect(eventTypes(finding!.path)).toEqual(["xstate.init", "FAULT", "RESOLVED"]);
  });

  it("says when the state space outgrows the bound", () => {
    const report = check(mqttConnectionModel(), { maxVisits: 50 });
    expect(report.findings).toMatchObject([{ kind: "bound" }]);
  });
});
