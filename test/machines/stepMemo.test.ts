import v8 from "node:v8";
import { runInNewContext } from "node:vm";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type AnyMachineSnapshot, type AnyStateMachine, assign, type EventObject, setup } from "xstate";
import { startChildMachine } from "../../src/actors/machineActor.js";
import { initialStep, type Step, step } from "../../src/machines/step.js";
import { storedDeliveryMachine } from "../../src/machines/storedDelivery.js";
import { models } from "../../src/modelcheck/models/index.js";

const failed = { type: "OPEN_FAILED", reason: "timeout", refused: false, permission: false, limit: false, jitter: 0.3 };
/** The stored reader has no model of its own in the model checker: its events here. */
const reader = {
  name: "storedDelivery",
  machine: storedDeliveryMachine as AnyStateMachine,
  input: { backoffMs: 250, maxBackoffMs: 5_000, parkMs: 15_000 },
  events: [
    { type: "OPENED" },
    { type: "OPENED", awaitPin: true },
    { type: "SERVED" },
    { type: "PIN_UNKNOWN" },
    { type: "PIN_LEFT_OVER", rewind: true, unpin: true },
    { type: "RETAKEN" },
    { type: "RETAKE_FAILED" },
    failed,
    { ...failed, refused: true },
    { type: "CONSUMER_LOST", reason: "gone", jitter: 0.7 },
    { type: "RETIRE" },
    { type: "RETIRED" },
    { type: "RETIRE_FAILED", jitter: 0.5 },
    { type: "PARK" },
    { type: "ADOPT" },
    { type: "ADOPT", awaitPin: true },
    { type: "STOP" },
  ] as readonly EventObject[],
};
/** Every machine with the events its edges may send (the model checker's alphabets), and the reader. */
const cases = [...models.map((m) => ({ ...m, name: m.name ?? m.machine.id })), reader];

/** What a step is, as data: the configuration, context, status and commands, timers and their delays included. */
const seen = ({ snapshot, effects }: Step) => ({
  value: snapshot.value,
  context: snapshot.context,
  status: snapshot.status,
  effects,
});
/** The same snapshot with a context no step has seen: its step is taken afresh. */
const unseen = (s: AnyMachineSnapshot): AnyMachineSnapshot => ({ ...s, context: structuredClone(s.context) });

describe("steps reused (stepMemo.ts)", () => {
  /** Steps reused in each case's second walks: the property is about them, so some must have been. */
  const reusedIn = new Map<string, number>();

  it.each(cases)(
    "$name: a step taken again from the same context is what a fresh step gives",
    ({ name, machine, input, events }) => {
      let reused = 0;
      fc.assert(
        fc.property(fc.array(fc.nat(), { maxLength: 12 }), (picks) => {
          const first = initialStep(machine, input).snapshot;
          // The first walk leaves its steps behind; the second one, from the very same snapshot, meets them.
          for (let walk = 0; walk < 2; walk++) {
            let s = first;
            // Timers may fire at any point, as the model checker has them.
            const timers = new Map<string, EventObject>();
            for (const pick of picks) {
              if (s.status !== "active") break;
              const choices = [...events, ...timers.values()];
              const event = choices[pick % choices.length]!;
              const taken = step(machine, s, event);
              const fresh = step(machine, unseen(s), event);
              expect(seen(taken)).toEqual(seen(fresh));
              if (walk === 1 && taken === step(machine, s, event)) reused++;
              for (const e of taken.effects) if (e.kind === "schedule") timers.set(e.id, e.event);
              s = taken.snapshot;
            }
          }
        }),
        { numRuns: 150 },
      );
      reusedIn.set(name, reused);
    },
  );

  it("reuses steps of every machine but a lame duck with no client (done at its start: no step to take)", () => {
    expect(cases.map((c) => c.name).filter((name) => !reusedIn.get(name))).toEqual(["lameDuck (0 clients)"]);
  });

  it("a snapshot's history is more than its context and configuration: never mixed up", () => {
    // No machine of the gateway has a history state; a machine that had one stays right.
    const m = setup({}).createMachine({
      context: {},
      initial: "a",
      states: {
        a: {
          initial: "a1",
          states: { a1: { on: { NEXT: "a2" } }, a2: {}, last: { type: "history" } },
          on: { AWAY: "b" },
        },
        b: { on: { BACK: "a.last" } },
      },
    });
    const start = initialStep(m, undefined).snapshot;
    const awayFromA1 = step(m, start, { type: "AWAY" }).snapshot;
    const awayFromA2 = step(m, step(m, start, { type: "NEXT" }).snapshot, { type: "AWAY" }).snapshot;
    expect(awayFromA2.context).toBe(awayFromA1.context);
    expect(step(m, awayFromA1, { type: "BACK" }).snapshot.value).toEqual({ a: "a1" });
    expect(step(m, awayFromA2, { type: "BACK" }).snapshot.value).toEqual({ a: "a2" });
  });

  it("an actor that steps on for long leaves nothing behind (what is kept is bounded)", async () => {
    v8.setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const counter = setup({}).createMachine({
      context: { n: 0 },
      on: { TICK: { actions: assign({ n: ({ context }) => context.n + 1 }) } },
    });
    // Held for the whole test, as machineActor.ts holds a machine's initial snapshots.
    const first = initialStep(counter, undefined).snapshot;
    let s = step(counter, first, { type: "TICK" }).snapshot;
    const early = new WeakRef(s.context);
    for (let i = 0; i < 5_000; i++) s = step(counter, s, { type: "TICK" }).snapshot;
    await new Promise((resolve) => setTimeout(resolve, 0));
    gc();
    expect(early.deref()).toBeUndefined();
    expect([first.context.n, s.context.n]).toEqual([0, 5_001]);
  });

  it("steps from contexts met once (each actor's own) do not push the shared ones out", () => {
    const own = setup({ types: { input: {} as { id: string } } }).createMachine({
      context: ({ input }) => ({ id: input.id, n: 0 }),
      on: { TICK: { actions: assign({ n: ({ context }) => context.n + 1 }) } },
    });
    const shared = initialStep(own, { id: "shared" }).snapshot;
    step(own, shared, { type: "TICK" });
    const hot = step(own, shared, { type: "TICK" });
    // Five tables' worth of connections, each stepping once from a context of its own.
    for (let i = 0; i < 5_000; i++) step(own, initialStep(own, { id: `client-${i}` }).snapshot, { type: "TICK" });
    expect(step(own, shared, { type: "TICK" })).toBe(hot);
  });

  it("a reused step's context and commands are frozen, so no edge changes another actor's", () => {
    const s = initialStep(storedDeliveryMachine, { backoffMs: 250, maxBackoffMs: 5_000 }).snapshot;
    // The first step from a context is taken and not kept; the next is kept.
    step(storedDeliveryMachine, s, { type: "OPENED" });
    const opened = step(storedDeliveryMachine, s, { type: "OPENED" });
    expect(step(storedDeliveryMachine, s, { type: "OPENED" })).toBe(opened);
    expect(Object.isFrozen(opened.snapshot.context)).toBe(true);
    const reading = opened.effects.find((e) => e.kind === "emit");
    expect(reading?.kind === "emit" && Object.isFrozen(reading.event)).toBe(true);
  });

  it("a step that sets a timer is reused with its delay; readers sharing a context still wait jittered, apart", () => {
    // Actors started from one plain input share their initial snapshot (machineActor.ts).
    const delays: number[] = [];
    const clock = { setTimeout: (_: () => void, ms: number) => delays.push(ms), clearTimeout: () => {} };
    const input = { backoffMs: 1_000, maxBackoffMs: 60_000, parkMs: 15_000 };
    const start = () => startChildMachine(storedDeliveryMachine, { input, onEmit: () => {}, clock }).actor;
    const readers = Array.from({ length: 20 }, start);
    expect(new Set(readers.map((r) => r.getSnapshot().context)).size).toBe(1);
    // Each failure comes with its own draw, as the edge makes it (actors/mqtt/storedDelivery.ts).
    for (const r of readers) r.send({ ...failed, jitter: Math.random() } as never);
    expect(delays).toHaveLength(20);
    expect(new Set(delays).size).toBeGreaterThan(10);

    // Parking times its grace: one step for every reader in the same place, each timed.
    const parked = Array.from({ length: 2 }, start);
    for (const r of parked) r.send({ type: "OPENED" });
    delays.length = 0;
    const s = parked[0]!.getSnapshot();
    for (const r of parked) r.send({ type: "PARK" });
    expect(step(storedDeliveryMachine, s, { type: "PARK" })).toBe(step(storedDeliveryMachine, s, { type: "PARK" }));
    expect(delays).toEqual([15_000, 15_000]);
  });
});
