import { assign, emit, setup } from "xstate";

/**
 * The gateway process as a whole. Once NATS and the services are up (STARTED) the client
 * listeners open (`opening`); the gateway serves once every one of them is listening, and
 * exits 2 when one cannot. New clients are accepted only while `accepting`; lame duck
 * closes the listeners first and then lets clients go over a duration; stopping flushes
 * and exits.
 */
export type GatewayEvent =
  /** NATS is reached and the services are up: the listeners may open. */
  | { type: "STARTED" }
  /** Every client listener is listening. */
  | { type: "LISTENING" }
  | { type: "START_FAILED"; reason: string }
  | { type: "LAME_DUCK" }
  | { type: "STOP" }
  | { type: "CLIENTS_DRAINED" }
  | { type: "STOPPED" };

export type GatewayEmitted =
  | { type: "open_listeners" }
  | { type: "close_listeners" }
  | { type: "drain_clients"; overMs: number }
  | { type: "close_clients" }
  | { type: "shutdown"; exitCode: number };

export interface GatewayContext {
  ldmDurationMs: number;
  exitCode: number;
  reason?: string;
}

export const gatewayMachine = setup({
  types: {
    context: {} as GatewayContext,
    events: {} as GatewayEvent,
    input: {} as { ldmDurationMs: number },
    emitted: {} as GatewayEmitted,
  },
  delays: { drainWindow: ({ context }) => context.ldmDurationMs + 5_000 },
}).createMachine({
  id: "gateway",
  context: ({ input }) => ({ ldmDurationMs: input.ldmDurationMs, exitCode: 0 }),
  initial: "starting",
  states: {
    starting: {
      on: {
        STARTED: { target: "opening" },
        START_FAILED: {
          target: "stopping",
          actions: assign({ exitCode: 2, reason: ({ event }) => event.reason }),
        },
        STOP: { target: "stopping" },
      },
    },
    opening: {
      // A client that connects to a listener already open is taken; one that cannot open fails the start.
      tags: ["accepting"],
      entry: emit({ type: "open_listeners" }),
      on: {
        LISTENING: { target: "serving" },
        START_FAILED: {
          target: "stopping",
          actions: assign({ exitCode: 2, reason: ({ event }) => event.reason }),
        },
        STOP: { target: "stopping" },
      },
    },
    serving: {
      tags: ["accepting"],
      on: {
        LAME_DUCK: { target: "lameDuck" },
        STOP: { target: "stopping" },
      },
    },
    lameDuck: {
      entry: [
        emit({ type: "close_listeners" }),
        emit(({ context }) => ({ type: "drain_clients" as const, overMs: context.ldmDurationMs })),
      ],
      on: {
        CLIENTS_DRAINED: { target: "stopping" },
        STOP: { target: "stopping" },
      },
      // A client that never goes away must not keep the process alive past its window.
      after: { drainWindow: { target: "stopping" } },
    },
    stopping: {
      entry: [emit({ type: "close_listeners" }), emit({ type: "close_clients" })],
      on: {
        STOPPED: { target: "stopped" },
      },
    },
    stopped: {
      type: "final",
      entry: emit(({ context }) => ({ type: "shutdown" as const, exitCode: context.exitCode })),
    },
  },
});
