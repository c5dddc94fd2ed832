import { describe, expect, it } from "vitest";
import { createMachine, setup } from "xstate";
import { startChildMachine, whenEnded } from "../../src/actors/machineActor.js";

const twoStep = createMachine({
  initial: "a",
  states: { a: { on: { GO: "b" } }, b: { on: { GO: "done" } }, done: { type: "final" } },
});

const throwing = setup({
  actions: {
    boom: () => {
      throw new Error("boom");
    },
  },
}).createMachine({ initial: "a", states: { a: { on: { GO: { actions: "boom" } } } } });

describe("whenEnded: an owner told of its actor's end without a subscription (machineActor.ts)", () => {
  it("a final state tells the owner once", () => {
    const { actor, stop } = startChildMachine(twoStep, { input: undefined });
    const heard: unknown[] = [];
    whenEnded(actor, (e) => heard.push(e ?? "done"));
    actor.send({ type: "GO" });
    expect(heard).toEqual([]);
    actor.send({ type: "GO" });
    expect(heard).toEqual(["done"]);
    stop();
    expect(heard).toEqual(["done"]);
  });

  it("a stop tells the owner, as a final state does", () => {
    const { actor, stop } = startChildMachine(twoStep, { input: undefined });
    const heard: unknown[] = [];
    whenEnded(actor, (e) => heard.push(e ?? "ended"));
    stop();
    expect(heard).toEqual(["ended"]);
  });

  it("an action that throws tells the owner its error, and nothing is left unhandled", () => {
    const { actor } = startChildMachine(throwing, { input: undefined });
    const heard: unknown[] = [];
    whenEnded(actor, (e) => heard.push(e));
    actor.send({ type: "GO" });
    expect(heard).toHaveLength(1);
    expect((heard[0] as Error).message).toBe("boom");
  });

  it("an actor already ended is told at once; a second owner is told too", () => {
    const { actor } = startChildMachine(twoStep, { input: undefined });
    const heard: string[] = [];
    whenEnded(actor, () => heard.push("first"));
    whenEnded(actor, () => heard.push("second"));
    actor.send({ type: "GO" });
    actor.send({ type: "GO" });
    expect(heard.sort()).toEqual(["first", "second"]);
    whenEnded(actor, () => heard.push("late"));
    expect(heard).toContain("late");
  });

  it("a watch stopped before the end hears nothing", () => {
    const { actor } = startChildMachine(twoStep, { input: undefined });
    const heard: string[] = [];
    const unwatch = whenEnded(actor, () => heard.push("x"));
    unwatch();
    actor.send({ type: "GO" });
    actor.send({ type: "GO" });
    expect(heard).toEqual([]);
  });
});
