import { describe, expect, it } from "vitest";
import { createMachine } from "xstate";
import { MachineActor } from "../src/actors/machineActor.js";
import { RecentTransitions } from "../src/actors/recentTransitions.js";
import { ActorRegistry, type ActorTransition, configuration } from "../src/actors/registry.js";

// A door: open and close it, or break it for good; `working` runs two regions at once.
const door = createMachine({
  id: "door",
  initial: "closed",
  states: {
    closed: { on: { OPEN: "open", BREAK: "broken" } },
    open: { on: { CLOSE: "closed", WORK: "working" } },
    working: {
      type: "parallel",
      states: { hinge: { initial: "oiled", states: { oiled: {} } }, lock: { initial: "free", states: { free: {} } } },
    },
    broken: { type: "final" },
  },
});

/** Tracks and starts an actor the way startMachine does, untracking when it ends. */
function live(registry: ActorRegistry, id: string) {
  const actor = new MachineActor(door, undefined, undefined, id);
  registry.track("door", actor);
  actor.whenEnded(() => registry.untrack(actor));
  actor.start();
  return actor;
}

describe("ActorRegistry transitions, for the live statecharts page", () => {
  it("follows actors that were live before anyone listened, with the event that moved them", () => {
    const registry = new ActorRegistry();
    const early = live(registry, "early");
    early.send({ type: "OPEN" });
    const heard: ActorTransition[] = [];
    registry.onTransition((t) => heard.push(t));
    early.send({ type: "CLOSE" });
    expect(heard).toMatchObject([{ machine: "door", actor: early, event: "CLOSE", from: "open", to: "closed" }]);
    expect(registry.recent(early).map((t) => [t.event, t.from, t.to])).toEqual([
      ["xstate.init", "", "closed"],
      ["OPEN", "closed", "open"],
      ["CLOSE", "open", "closed"],
    ]);
  });

  it("records the final state before the actor leaves, then its leaving", async () => {
    const registry = new ActorRegistry();
    const heard: string[] = [];
    registry.onTransition((t) => heard.push(`${t.event}:${t.to}`));
    const actor = live(registry, "short");
    actor.send({ type: "BREAK" });
    expect(registry.size("door")).toBe(0);
    await Promise.resolve();
    expect(heard).toEqual(["xstate.init:closed", "BREAK:broken", "left:"]);
  });

  it("counts each actor once per configuration, every parallel region included", () => {
    const registry = new ActorRegistry();
    const a = live(registry, "a");
    live(registry, "b");
    a.send({ type: "OPEN" });
    a.send({ type: "WORK" });
    expect(registry.configurations()).toEqual({ door: { closed: 1, "working.hinge.oiled | working.lock.free": 1 } });
    expect(registry.find("a")?.actor).toBe(a);
    expect(configuration({ status: "stopped" })).toBe("stopped");
  });

  it("keeps only the last few transitions of an actor, oldest first", () => {
    const ring = new RecentTransitions(3);
    for (let i = 1; i <= 5; i++) ring.add(i, `E${i}`, "", "");
    expect(ring.toArray().map((t) => t.event)).toEqual(["E3", "E4", "E5"]);
    // Each kept transition starts where the one before it ended, the oldest too after the ring turned.
    const path = new RecentTransitions(2);
    for (const [from, to] of [
      ["", "a"],
      ["a", "b"],
      ["b", "c"],
      ["c", "d"],
    ])
      path.add(1, "E", from!, to!);
    expect(path.toArray().map((t) => `${t.from}>${t.to}`)).toEqual(["b>c", "c>d"]);
  });
});
