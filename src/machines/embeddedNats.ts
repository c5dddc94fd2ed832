import { assign, emit, setup } from "xstate";

/**
 * The embedded nats-server child: started, watched, restarted with backoff when it dies,
 * stopped with the gateway. The actor spawns and kills; the machine decides when.
 */
export type EmbeddedNatsEvent =
  | { type: "READY"; version: string }
  | { type: "EXITED"; code: number | null; signal: string | null }
  | { type: "STOP" };

export type EmbeddedNatsEmitted =
  | { type: "spawn" }
  | { type: "kill" }
  | { type: "ready"; version: string }
  | { type: "down"; restartInMs: number }
  | { type: "stopped" };

export const embeddedNatsMachine = setup({
  types: {
    context: {} as { restarts: number; version: string },
    events: {} as EmbeddedNatsEvent,
    emitted: {} as EmbeddedNatsEmitted,
  },
  delays: {
    // 250 ms, 500 ms, 1 s ... capped at 5 s: a crash loop must not spin the CPU.
    backoff: ({ context }) => Math.min(5_000, 250 * 2 ** Math.min(context.restarts, 5)),
  },
}).createMachine({
  id: "embeddedNats",
  context: { restarts: 0, version: "" },
  initial: "starting",
  states: {
    starting: {
      entry: emit({ type: "spawn" }),
      on: {
        READY: {
          target: "running",
          actions: assign({ version: ({ event }) => event.version }),
        },
        EXITED: { target: "crashed" },
        STOP: { target: "stopping" },
      },
    },
    running: {
      entry: emit(({ context }) => ({ type: "ready" as const, version: context.version })),
      on: {
        EXITED: { target: "crashed" },
        STOP: { target: "stopping" },
      },
    },
    crashed: {
      entry: [
        assign({ restarts: ({ context }) => context.restarts + 1 }),
        emit(({ context }) => ({
          type: "down" as const,
          restartInMs: Math.min(5_000, 250 * 2 ** Math.min(context.restarts, 5)),
        })),
      ],
      after: { backoff: { target: "starting" } },
      on: { STOP: { target: "stopped" } },
    },
    stopping: {
      entry: emit({ type: "kill" }),
      on: { EXITED: { target: "stopped" } },
    },
    stopped: {
      type: "final",
      entry: emit({ type: "stopped" }),
    },
  },
});
