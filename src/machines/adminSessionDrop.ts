import { assign, emit, setup } from "xstate";

/**
 * One `sessions.drop`: read the session's record, let its client go where it is connected
 * (here, or on the gateway the record names, asked over the admin subjects), then delete
 * the session's consumers and its record. The client goes first so that its connection
 * cannot write the session back; its detach, conditional on the revision it last saw,
 * fails once the record is gone. Each step that NATS or the other gateway does not answer
 * in `timeoutMs` fails the drop, saying where it stopped.
 */
export type AdminSessionDropEvent =
  | { type: "FOUND"; owner: string | undefined }
  | { type: "NOT_FOUND" }
  | { type: "KICKED" }
  | { type: "DELETED"; consumers: number }
  | { type: "FAILED"; reason: string };

export type AdminSessionDropEmitted =
  | { type: "read" }
  | { type: "kick"; owner: string }
  | { type: "delete" }
  | { type: "dropped"; kicked: string | undefined; consumers: number }
  | { type: "failed"; reason: string };

export interface AdminSessionDropContext {
  readonly timeoutMs: number;
  /** The gateway whose client was let go, if the session was connected. */
  owner: string | undefined;
  consumers: number;
  reason: string;
}

export const adminSessionDropMachine = setup({
  types: {
    context: {} as AdminSessionDropContext,
    events: {} as AdminSessionDropEvent,
    emitted: {} as AdminSessionDropEmitted,
    input: {} as { timeoutMs: number },
  },
  delays: { stepTimeout: ({ context }) => context.timeoutMs },
  guards: { connected: ({ event }) => event.type === "FOUND" && event.owner !== undefined },
}).createMachine({
  id: "adminSessionDrop",
  context: ({ input }) => ({ timeoutMs: input.timeoutMs, owner: undefined, consumers: 0, reason: "" }),
  initial: "reading",
  on: { FAILED: { target: ".failed", actions: assign({ reason: ({ event }) => event.reason }) } },
  states: {
    reading: {
      entry: emit({ type: "read" as const }),
      on: {
        FOUND: [
          { guard: "connected", target: "kicking", actions: assign({ owner: ({ event }) => event.owner }) },
          { target: "deleting" },
        ],
        NOT_FOUND: { target: "failed", actions: assign({ reason: "no such session" }) },
      },
      after: {
        stepTimeout: {
          target: "failed",
          actions: assign({ reason: ({ context }) => `reading the session: no answer within ${context.timeoutMs} ms` }),
        },
      },
    },
    kicking: {
      entry: emit(({ context }) => ({ type: "kick" as const, owner: context.owner ?? "" })),
      on: { KICKED: { target: "deleting" } },
      after: {
        stepTimeout: {
          target: "failed",
          actions: assign({
            reason: ({ context }) => `letting the client go: no answer within ${context.timeoutMs} ms`,
          }),
        },
      },
    },
    deleting: {
      entry: emit({ type: "delete" as const }),
      on: { DELETED: { target: "dropped", actions: assign({ consumers: ({ event }) => event.consumers }) } },
      after: {
        stepTimeout: {
          target: "failed",
          actions: assign({
            reason: ({ context }) => `deleting the session: no answer within ${context.timeoutMs} ms`,
          }),
        },
      },
    },
    dropped: {
      type: "final",
      entry: emit(({ context }) => ({ type: "dropped" as const, kicked: context.owner, consumers: context.consumers })),
    },
    failed: {
      type: "final",
      entry: emit(({ context }) => ({ type: "failed" as const, reason: context.reason })),
    },
  },
});
