import { assign, emit, setup } from "xstate";

/**
 * Lame duck's drain (SIGUSR2 or the admin `ldm` op), once the listeners are closed: the
 * clients there were at the start are let go one at a time, evenly over the window, so
 * they do not all reconnect to the other gateways at once. Clients that leave on their
 * own shorten it; clients that outstay the grace period are left to the gateway's stop.
 */
export type LameDuckEvent = { type: "CLIENTS_GONE" };

export type LameDuckEmitted = { type: "close_next" } | { type: "drained" } | { type: "timed_out"; closed: number };

export interface LameDuckContext {
  readonly total: number;
  readonly overMs: number;
  readonly graceMs: number;
  closed: number;
}

export const lameDuckMachine = setup({
  types: {
    context: {} as LameDuckContext,
    events: {} as LameDuckEvent,
    emitted: {} as LameDuckEmitted,
    input: {} as { clients: number; overMs: number; graceMs: number },
  },
  delays: {
    // n clients over the window: one now, then one every window/n.
    step: ({ context }) => (context.total > 1 ? Math.floor(context.overMs / context.total) : 0),
    grace: ({ context }) => context.graceMs,
  },
  guards: {
    noClients: ({ context }) => context.total === 0,
    allAsked: ({ context }) => context.closed >= context.total,
  },
}).createMachine({
  id: "lameDuck",
  context: ({ input }) => ({ total: input.clients, overMs: input.overMs, graceMs: input.graceMs, closed: 0 }),
  initial: "starting",
  on: { CLIENTS_GONE: { target: ".drained" } },
  states: {
    starting: {
      always: [{ guard: "noClients", target: "drained" }, { target: "closing" }],
    },
    closing: {
      entry: [emit({ type: "close_next" }), assign({ closed: ({ context }) => context.closed + 1 })],
      always: { guard: "allAsked", target: "waiting" },
      after: { step: { target: "closing", reenter: true } },
    },
    // Every client was asked to go; their actors say goodbye (0x8B) and leave.
    waiting: {
      after: { grace: { target: "timedOut" } },
    },
    drained: {
      type: "final",
      entry: emit({ type: "drained" }),
    },
    timedOut: {
      type: "final",
      entry: emit(({ context }) => ({ type: "timed_out" as const, closed: context.closed })),
    },
  },
});
