import { assign, emit, setup } from "xstate";

/**
 * One `rebalance`: moves the NATS connections of one account's clients on this gateway
 * to one nats-server, one connection at a time, spread evenly over `over`. The reply
 * (`started: true`) has gone before the first move; the outcome is logged (and counted
 * in /metrics by machine and state).
 *
 * The target is a URL or a server name. For a name the gateway does not know the URL
 * yet: the first connection tries each candidate URL (from its pool) in turn, and the
 * first one where it lands on a server of that name is the URL for the rest. If the
 * first connection lands on no server of that name (or, for a URL, does not land there),
 * the rebalance stops. Later misses are counted, not fatal: one flapping server should
 * not leave the rest where they were.
 */
export type AdminRebalanceEvent =
  | { type: "MOVED"; landed: boolean; server: string; url: string }
  | { type: "MOVE_FAILED"; reason: string }
  /** The connection to move next has gone (its clients left): skip it. */
  | { type: "SKIPPED" };

export type AdminRebalanceEmitted =
  | { type: "move"; index: number; url: string }
  | { type: "done"; moved: number; missed: number; skipped: number }
  | { type: "stopped"; reason: string; moved: number };

export interface AdminRebalanceInput {
  /** Connections to move (already capped by `max`). */
  readonly connections: number;
  readonly overMs: number;
  /** Where the first connection tries, in order; one entry for a URL target. */
  readonly candidates: readonly string[];
  /** How the operator named the server, for reasons. */
  readonly target: string;
  /** A move that has not landed anywhere after this long counts as failed. */
  readonly moveTimeoutMs: number;
}

export interface AdminRebalanceContext extends AdminRebalanceInput {
  /** The resolved URL once the first connection landed; "" before. */
  url: string;
  /** Index of the candidate the first connection tries now. */
  tried: number;
  /** Index of the connection being moved (0-based). */
  index: number;
  moved: number;
  missed: number;
  skipped: number;
  lastLanded: boolean;
  lastServer: string;
  reason: string;
}

export const adminRebalanceMachine = setup({
  types: {
    context: {} as AdminRebalanceContext,
    events: {} as AdminRebalanceEvent,
    emitted: {} as AdminRebalanceEmitted,
    input: {} as AdminRebalanceInput,
  },
  delays: {
    // n connections over the window: one now, then one every window/n.
    step: ({ context }) => (context.connections > 1 ? Math.floor(context.overMs / context.connections) : 0),
    moveTimeout: ({ context }) => context.moveTimeoutMs,
  },
  guards: {
    nothingToMove: ({ context }) => context.connections === 0,
    resolved: ({ context }) => context.url !== "",
    landed: ({ context }) => context.lastLanded,
    moreCandidates: ({ context }) => context.tried + 1 < context.candidates.length,
    allMoved: ({ context }) => context.index + 1 >= context.connections,
  },
}).createMachine({
  id: "adminRebalance",
  context: ({ input }) => ({
    ...input,
    url: "",
    tried: 0,
    index: 0,
    moved: 0,
    missed: 0,
    skipped: 0,
    lastLanded: false,
    lastServer: "",
    reason: "",
  }),
  initial: "resolving",
  states: {
    // The first connection finds the target's URL by moving there.
    resolving: {
      always: [
        { guard: "nothingToMove", target: "done" },
        {
          guard: ({ context }) => context.candidates.length === 0,
          target: "stopped",
          actions: assign({ reason: ({ context }) => `no URL to try for server ${context.target}` }),
        },
        { target: "moving" },
      ],
    },
    moving: {
      entry: emit(({ context }) => ({
        type: "move" as const,
        index: context.index,
        url: context.url !== "" ? context.url : (context.candidates[context.tried] ?? ""),
      })),
      on: {
        MOVED: {
          target: "checking",
          actions: assign({
            lastLanded: ({ event }) => event.landed,
            lastServer: ({ event }) => event.server,
          }),
        },
        MOVE_FAILED: [
          {
            guard: "resolved",
            target: "next",
            actions: assign({ missed: ({ context }) => context.missed + 1 }),
          },
          { target: "stopped", actions: assign({ reason: ({ event }) => `the first move failed: ${event.reason}` }) },
        ],
        SKIPPED: { target: "next", actions: assign({ skipped: ({ context }) => context.skipped + 1 }) },
      },
      after: {
        moveTimeout: [
          { guard: "resolved", target: "next", actions: assign({ missed: ({ context }) => context.missed + 1 }) },
          {
            target: "stopped",
            actions: assign({
              reason: ({ context }) => `the first connection did not reconnect within ${context.moveTimeoutMs} ms`,
            }),
          },
        ],
      },
    },
    checking: {
      always: [
        // Landed: the first landing fixes the URL for the rest.
        {
          guard: "landed",
          target: "next",
          actions: assign({
            moved: ({ context }) => context.moved + 1,
            url: ({ context }) => (context.url !== "" ? context.url : (context.candidates[context.tried] ?? "")),
          }),
        },
        // Missed after the URL was known: count it and go on.
        { guard: "resolved", target: "next", actions: assign({ missed: ({ context }) => context.missed + 1 }) },
        // The first connection missed: try the next candidate for a name.
        {
          guard: "moreCandidates",
          target: "moving",
          reenter: true,
          actions: assign({ tried: ({ context }) => context.tried + 1 }),
        },
        {
          target: "stopped",
          actions: assign({
            reason: ({ context }) =>
              `the first connection did not land on ${context.target} (it is on ${context.lastServer || "no server"})`,
          }),
        },
      ],
    },
    next: {
      always: [
        // A first connection that was skipped does not resolve the URL: the next one tries.
        { guard: "allMoved", target: "done" },
      ],
      after: {
        step: { target: "moving", actions: assign({ index: ({ context }) => context.index + 1 }) },
      },
    },
    done: {
      type: "final",
      entry: emit(({ context }) => ({
        type: "done" as const,
        moved: context.moved,
        missed: context.missed,
        skipped: context.skipped,
      })),
    },
    stopped: {
      type: "final",
      entry: emit(({ context }) => ({ type: "stopped" as const, reason: context.reason, moved: context.moved })),
    },
  },
});
