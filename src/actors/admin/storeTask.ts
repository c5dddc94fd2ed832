import { Effect, type Scope } from "effect";
import { adminStoreRequestMachine } from "../../machines/adminStoreRequest.js";
import { ActorTasks } from "../actorTasks.js";
import { awaitDone, startMachine } from "../machineActor.js";
import type { ActorRegistry } from "../registry.js";

/** How long an admin request waits for NATS (a KV read, a stream purge) before it answers with the failure. */
export const STORE_TIMEOUT_MS = 10_000;

/**
 * One admin request on what NATS keeps (sessions, retained messages, bans) as an actor:
 * the machine asks once and answers once (machines/adminStoreRequest.ts); this does the
 * asking and hands the outcome back.
 */
export const storeTask = (
  work: () => Promise<object>,
  registry: ActorRegistry,
  answer: (outcome: { ok: true; reply: object } | { ok: false; reason: string }) => void,
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    // The asking is a fiber of this actor: a request still out when the actor ends is interrupted.
    const tasks = yield* ActorTasks.scoped((e) =>
      actor.send({ type: "FAILED", reason: e instanceof Error ? e.message : String(e) }),
    );
    const actor = yield* startMachine(adminStoreRequestMachine, {
      input: { timeoutMs: STORE_TIMEOUT_MS },
      registry,
      on: {
        ask: () => tasks.run(work, (reply) => actor.send({ type: "ANSWERED", reply })),
        answer: ({ reply }) => answer({ ok: true, reply }),
        failed: ({ reason }) => answer({ ok: false, reason }),
      },
    });
    yield* awaitDone(actor);
  });
