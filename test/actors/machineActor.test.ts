import { describe, expect, it, vi } from "vitest";
import { assign, emit, setup } from "xstate";
import { startChildMachine } from "../../src/actors/machineActor.js";

// A light: ON asks the edge to switch it on and turns itself off after 1 s; each switch is counted.
const light = setup({
  types: {
    context: {} as { switched: number },
    events: {} as { type: "ON" } | { type: "OFF" },
    emitted: {} as { type: "switch"; on: boolean; switched: number },
  },
  delays: { autoOff: 1_000 },
}).createMachine({
  id: "light",
  context: { switched: 0 },
  initial: "off",
  states: {
    off: {
      on: {
        ON: {
          target: "on",
          actions: [
            assign({ switched: ({ context }) => context.switched + 1 }),
            emit(({ context }) => ({ type: "switch" as const, on: true, switched: context.switched })),
          ],
        },
      },
    },
    on: {
      after: { autoOff: { target: "off" } },
      on: {
        OFF: {
          target: "off",
          actions: emit(({ context }) => ({ type: "switch" as const, on: false, switched: context.switched })),
        },
      },
    },
  },
});

describe("MachineActor: a machine stepped as data, with a mailbox and timers (machineActor.ts)", () => {
  it("a command sees the state it was emitted from; events sent while one is taken wait their turn, in order", () => {
    const seen: string[] = [];
    const { actor } = startChildMachine(light, {
      input: undefined,
      onEmit: (e) => {
        seen.push(`${e.on ? "on" : "off"}#${e.switched} in ${String(actor.getSnapshot().value)}`);
        // Sent from inside the handler: taken after this event, not in the middle of it.
        if (e.on) actor.send({ type: "OFF" });
        if (!e.on && e.switched < 2) actor.send({ type: "ON" });
      },
    });
    actor.send({ type: "ON" });
    expect(seen).toEqual(["on#1 in on", "off#1 in off", "on#2 in on", "off#2 in off"]);
    expect(actor.getSnapshot().value).toBe("off");
  });

  it("a delay fires as an event; leaving the state cancels it; a stopped actor has no timer and takes no event", () => {
    vi.useFakeTimers();
    try {
      const { actor, stop } = startChildMachine(light, { input: undefined });
      actor.send({ type: "ON" });
      vi.advanceTimersByTime(999);
      expect(actor.getSnapshot().value).toBe("on");
      vi.advanceTimersByTime(1);
      expect(actor.getSnapshot().value).toBe("off");
      actor.send({ type: "ON" });
      actor.send({ type: "OFF" });
      expect(vi.getTimerCount()).toBe(0);
      actor.send({ type: "ON" });
      expect(vi.getTimerCount()).toBe(1);
      stop();
      expect(vi.getTimerCount()).toBe(0);
      expect(actor.getSnapshot().status).toBe("stopped");
      actor.send({ type: "OFF" });
      expect(actor.getSnapshot().value).toBe("on");
    } finally {
      vi.useRealTimers();
    }
  });

  it("a command handler that throws fails the actor, not the process: its owner hears the error", () => {
    const { actor } = startChildMachine(light, {
      input: undefined,
      onEmit: () => {
        throw new Error("socket gone");
      },
    });
    const heard: unknown[] = [];
    actor.whenEnded((e) => heard.push(e));
    actor.send({ type: "ON" });
    expect(actor.getSnapshot().status).toBe("error");
    expect((heard[0] as Error).message).toBe("socket gone");
    actor.send({ type: "OFF" });
    expect(heard).toHaveLength(1);
  });

  it("actors of one machine and input start from one initial step, and each goes its own way from there", () => {
    // A machine whose initial state asks something of its edge, from its input.
    const greeter = setup({
      types: {
        context: {} as { name: string; n: number },
        input: {} as { name: string; n?: number },
        events: {} as { type: "NEXT" },
        emitted: {} as { type: "hello"; name: string; n: number },
      },
    }).createMachine({
      id: "greeter",
      context: ({ input }) => ({ name: input.name, n: input.n ?? 0 }),
      entry: emit(({ context }) => ({ type: "hello" as const, name: context.name, n: context.n })),
      on: {
        NEXT: {
          actions: [
            assign({ n: ({ context }) => context.n + 1 }),
            emit(({ context }) => ({ type: "hello" as const, name: context.name, n: context.n })),
          ],
        },
      },
    });
    const heard: string[][] = [[], [], [], []];
    const start = (i: number, input: { name: string; n?: number }) =>
      startChildMachine(greeter, { input, onEmit: (e) => heard[i]!.push(`${e.name}${e.n}`) }).actor;
    const a = start(0, { name: "a" });
    const b = start(1, { name: "a" });
    const c = start(2, { name: "c", n: 5 });
    a.send({ type: "NEXT" });
    a.send({ type: "NEXT" });
    b.send({ type: "NEXT" });
    const d = start(3, { name: "a" });
    expect(heard).toEqual([["a0", "a1", "a2"], ["a0", "a1"], ["c5"], ["a0"]]);
    expect([a, b, c, d].map((x) => x.getSnapshot().context.n)).toEqual([2, 1, 5, 0]);
  });
});
