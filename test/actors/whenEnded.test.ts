import { assign, createActor, createMachine, setup } from "xstate";
import { describe, expect, it } from "vitest";
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
  it.each([true, false])("a final state tells the owner once (shared host: %s)", (shared) => {
    const { actor, stop } = startChildMachine(twoStep, { input: undefined, shared });
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
    const { actor, stop } = startChildMachine(twoStep, { input: undefined, shared: true });
    const heard: unknown[] = [];
    whenEnded(actor, (e) => heard.push(e ?? "ended"));
    stop();
    expect(heard).toEqual(["ended"]);
  });

  it.each([true, false])("an action that throws tells the owner its error, and nothing is left unhandled (shared host: %s)", (shared) => {
    const { actor } = startChildMachine(throwing, { input: undefined, shared });
    const heard: unknown[] = [];
    whenEnded(actor, (e) => heard.push(e));
    actor.send({ type: "GO" });
    expect(heard).toHaveLength(1);
    expect((heard[0] as Error).message).toBe("boom");
  });

  it("an actor already ended is told at once; a second owner, and an actor made elsewhere, through subscribe", () => {
    const { actor } = startChildMachine(twoStep, { input: undefined, shared: true });
    const heard: string[] = [];
    whenEnded(actor, () => heard.push("first"));
    whenEnded(actor, () => heard.push("second"));
    actor.send({ type: "GO" });
    actor.send({ type: "GO" });
    expect(heard.sort()).toEqual(["first", "second"]);
    whenEnded(actor, () => heard.push("late"));
    expect(heard).toContain("late");

    const counter = createMachine({
      context: { n: 0 },
      initial: "on",
      states: { on: { on: { INC: { actions: assign({ n: ({ context }) => context.n + 1 }) }, END: "off" } }, off: { type: "final" } },
    });
    const plain = createActor(counter).start();
    const told: string[] = [];
    whenEnded(plain, () => told.push("plain"));
    plain.send({ type: "INC" });
    plain.send({ type: "END" });
    expect(told).toEqual(["plain"]);
  });

  it("a watch stopped before the end hears nothing", () => {
    const { actor } = startChildMachine(twoStep, { input: undefined, shared: true });
    const heard: string[] = [];
    const unwatch = whenEnded(actor, () => heard.push("x"));
    unwatch();
    actor.send({ type: "GO" });
    actor.send({ type: "GO" });
    expect(heard).toEqual([]);
  });
});
