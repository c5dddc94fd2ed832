import { assign, emit, setup } from "xstate";

/**
 * One admin request that reads or writes what NATS keeps for the gateways (sessions,
 * retained messages, bans): it asks once and answers once. A store that does not answer
 * fails the request after `timeoutMs` rather than leaving the operator waiting; an answer
 * that comes after that is dropped (the machine has ended).
 */
export type AdminStoreRequestEvent = { type: "ANSWERED"; reply: object } | { type: "FAILED"; reason: string };

export type AdminStoreRequestEmitted =
  | { type: "ask" }
  | { type: "answer"; reply: object }
  | { type: "failed"; reason: string };

export interface AdminStoreRequestContext {
  readonly timeoutMs: number;
  reply: object;
  reason: string;
}

export const adminStoreRequestMachine = setup({
  types: {
    context: {} as AdminStoreRequestContext,
    events: {} as AdminStoreRequestEvent,
    emitted: {} as AdminStoreRequestEmitted,
    input: {} as { timeoutMs: number },
  },
  delays: { storeTimeout: ({ context }) => context.timeoutMs },
}).createMachine({
  id: "adminStoreRequest",
  context: ({ input }) => ({ timeoutMs: input.timeoutMs, reply: {}, reason: "" }),
  initial: "asking",
  states: {
    asking: {
      entry: emit({ type: "ask" as const }),
      on: {
        ANSWERED: { target: "answered", actions: assign({ reply: ({ event }) => event.reply }) },
        FAILED: { target: "failed", actions: assign({ reason: ({ event }) => event.reason }) },
      },
      after: {
        storeTimeout: {
          target: "failed",
          actions: assign({ reason: ({ context }) => `NATS did not answer within ${context.timeoutMs} ms` }),
        },
      },
    },
    answered: {
      type: "final",
      entry: emit(({ context }) => ({ type: "answer" as const, reply: context.reply })),
    },
    failed: {
      type: "final",
      entry: emit(({ context }) => ({ type: "failed" as const, reason: context.reason })),
    },
  },
});
