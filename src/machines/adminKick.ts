import { assign, emit, setup } from "xstate";

/**
 * One `kick` request: find the connection, tell it to go, and answer only once it has
 * left the gateway (or say why not). A connection that ignores the kick fails the
 * request after `timeoutMs` rather than leaving the operator waiting.
 */
export type AdminKickEvent =
  | { type: "FOUND"; cid: number }
  | { type: "NOT_FOUND"; reason: string }
  | { type: "AMBIGUOUS"; cids: readonly number[] }
  | { type: "GONE" };

export type AdminKickEmitted =
  | { type: "kick"; cid: number }
  | { type: "kicked"; cid: number }
  | { type: "failed"; reason: string };

export interface AdminKickContext {
  readonly timeoutMs: number;
  cid: number;
  reason: string;
}

export const adminKickMachine = setup({
  types: {
    context: {} as AdminKickContext,
    events: {} as AdminKickEvent,
    emitted: {} as AdminKickEmitted,
    input: {} as { timeoutMs: number },
  },
  delays: { kickTimeout: ({ context }) => context.timeoutMs },
}).createMachine({
  id: "adminKick",
  context: ({ input }) => ({ timeoutMs: input.timeoutMs, cid: 0, reason: "" }),
  initial: "finding",
  states: {
    // The actor looks the target up in the registry and reports what it found.
    finding: {
      on: {
        FOUND: { target: "kicking", actions: assign({ cid: ({ event }) => event.cid }) },
        NOT_FOUND: { target: "failed", actions: assign({ reason: ({ event }) => event.reason }) },
        // Guessing would kick the wrong device: AMQP containers may share an id, and an
        // MQTT takeover may be in flight. The operator picks one by cid from `list`.
        AMBIGUOUS: {
          target: "failed",
          actions: assign({
            reason: ({ event }) =>
              `several connections have this client_id (cids ${event.cids.join(", ")}): kick one of them by cid on the server scope`,
          }),
        },
      },
    },
    kicking: {
      entry: emit(({ context }) => ({ type: "kick" as const, cid: context.cid })),
      on: { GONE: { target: "done" } },
      after: {
        kickTimeout: {
          target: "failed",
          actions: assign({
            reason: ({ context }) =>
              `client ${context.cid} was told to go but is still connected after ${context.timeoutMs} ms`,
          }),
        },
      },
    },
    done: {
      type: "final",
      entry: emit(({ context }) => ({ type: "kicked" as const, cid: context.cid })),
    },
    failed: {
      type: "final",
      entry: emit(({ context }) => ({ type: "failed" as const, reason: context.reason })),
    },
  },
});
