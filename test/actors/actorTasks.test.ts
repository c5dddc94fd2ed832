import { Effect, Exit, Scope } from "effect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ActorTasks } from "../../src/actors/actorTasks.js";

/** A promise the test settles by hand: work still running until it says so. */
function pending<A>() {
  let resolve!: (a: A) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<A>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets promise reactions and Node's unhandled-rejection check run. */
const settle = () => new Promise<void>((r) => setImmediate(() => setImmediate(r)));

describe("ActorTasks: an actor's async work, owned by it (actorTasks.ts)", () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  beforeEach(() => {
    unhandled.length = 0;
    process.on("unhandledRejection", onUnhandled);
  });
  afterEach(() => {
    process.off("unhandledRejection", onUnhandled);
  });

  it("a task's result reaches the actor while it lives", async () => {
    const failures: unknown[] = [];
    const tasks = new ActorTasks((e) => failures.push(e));
    const acted: number[] = [];
    const work = pending<number>();
    tasks.run(
      () => work.promise,
      (n) => acted.push(n),
    );
    expect(tasks.size).toBe(1);
    work.resolve(7);
    await settle();
    expect(acted).toEqual([7]);
    expect(tasks.size).toBe(0);
    expect(failures).toEqual([]);
  });

  it("work still running when the actor closes is interrupted: its signal aborts, its result never acts", async () => {
    const failures: unknown[] = [];
    const tasks = new ActorTasks((e) => failures.push(e));
    const acted: string[] = [];
    const ok = pending<string>();
    const bad = pending<string>();
    let signal: AbortSignal | undefined;
    tasks.run(
      (s) => {
        signal = s;
        return ok.promise;
      },
      (v) => acted.push(v),
    );
    tasks.run(
      () => bad.promise,
      (v) => acted.push(v),
    );
    expect(tasks.size).toBe(2);
    expect(signal?.aborted).toBe(false);
    tasks.close();
    expect(signal?.aborted).toBe(true);
    expect(tasks.size).toBe(0);
    // The work finishes after the close, one way or the other: nothing acts on the closed actor.
    ok.resolve("late");
    bad.reject(new Error("late failure"));
    await settle();
    expect(acted).toEqual([]);
    expect(failures).toEqual([]);
    expect(unhandled).toEqual([]);
    // Nothing starts once closed.
    let started = false;
    tasks.run(async () => {
      started = true;
    });
    expect(started).toBe(false);
  });

  it("a failure reaches the actor's handler, not the process: a rejection, a synchronous throw, a throwing `then`", async () => {
    const failures: string[] = [];
    const tasks = new ActorTasks((e) => failures.push((e as Error).message));
    tasks.run(() => Promise.reject(new Error("rejected")));
    tasks.run(() => {
      throw new Error("thrown");
    });
    tasks.run(
      () => Promise.resolve(1),
      () => {
        throw new Error("then threw");
      },
    );
    await settle();
    expect(failures.sort()).toEqual(["rejected", "then threw", "thrown"]);
    expect(tasks.size).toBe(0);
    expect(unhandled).toEqual([]);
  });

  it("the synchronous part of a task runs before run returns, in order (as a plain call's would)", () => {
    const tasks = new ActorTasks(() => {});
    const order: string[] = [];
    tasks.run(async () => {
      order.push("first");
      await null;
      order.push("first, later");
    });
    tasks.run(async () => {
      order.push("second");
    });
    order.push("after");
    expect(order).toEqual(["first", "second", "after"]);
    tasks.close();
  });

  it("a task whose synchronous part ends the actor is interrupted too, and its result never acts", async () => {
    const tasks = new ActorTasks(() => {});
    const acted: string[] = [];
    let signal: AbortSignal | undefined;
    tasks.run(
      (s) => {
        signal = s;
        tasks.close();
        return Promise.resolve("late");
      },
      (v) => acted.push(v),
    );
    expect(signal?.aborted).toBe(true);
    await settle();
    expect(acted).toEqual([]);
    expect(tasks.size).toBe(0);
  });

  it("interrupt ends what runs now and keeps the tasks open (a watcher following a new connection)", async () => {
    const tasks = new ActorTasks(() => {});
    const acted: string[] = [];
    const old = pending<string>();
    tasks.run(
      () => old.promise,
      (v) => acted.push(v),
    );
    tasks.interrupt();
    tasks.run(
      () => Promise.resolve("new"),
      (v) => acted.push(v),
    );
    old.resolve("old");
    await settle();
    expect(acted).toEqual(["new"]);
  });

  it("scoped: closing the actor's Scope interrupts its tasks", async () => {
    const acted: string[] = [];
    const work = pending<string>();
    let signal: AbortSignal | undefined;
    const scope = Effect.runSync(Scope.make());
    const tasks = Effect.runSync(
      Scope.provide(
        ActorTasks.scoped(() => {}),
        scope,
      ),
    );
    tasks.run(
      (s) => {
        signal = s;
        return work.promise;
      },
      (v) => acted.push(v),
    );
    await Effect.runPromise(Scope.close(scope, Exit.void));
    expect(signal?.aborted).toBe(true);
    work.resolve("late");
    await settle();
    expect(acted).toEqual([]);
  });
});
