import { emit, setup } from "xstate";

/**
 * One browser following the live statecharts page (`GET /statecharts/events`, a
 * server-sent event stream). Changes are batched and written by the actor's plain
 * functions while the stream is `streaming`; the machine decides what to do about a
 * viewer that cannot keep up: stop writing rather than buffer without end, resync
 * once its socket drains, and let it go if it never does.
 */
export type StatechartsViewerEvent =
  /** A write filled the socket's buffer. */
  | { type: "BLOCKED" }
  /** The socket's buffer emptied. */
  | { type: "DRAINED" }
  /** The browser went away. */
  | { type: "CLOSED" }
  /** The gateway is stopping. */
  | { type: "SHUTDOWN" };

export type StatechartsViewerEmitted =
  /** Write every count in full, then follow the changes. */
  { type: "sync" } | { type: "end" };

export interface StatechartsViewerContext {
  readonly heartbeatMs: number;
  readonly stallMs: number;
}

export const statechartsViewerMachine = setup({
  types: {
    context: {} as StatechartsViewerContext,
    events: {} as StatechartsViewerEvent,
    emitted: {} as StatechartsViewerEmitted,
    input: {} as StatechartsViewerContext,
  },
  delays: {
    heartbeat: ({ context }) => context.heartbeatMs,
    stall: ({ context }) => context.stallMs,
  },
}).createMachine({
  id: "statechartsViewer",
  context: ({ input }) => input,
  initial: "streaming",
  on: {
    CLOSED: { target: ".closed" },
    SHUTDOWN: { target: ".closed" },
  },
  states: {
    streaming: {
      // A full sync on a quiet stream also keeps proxies from timing it out, and heals
      // anything a viewer may have missed.
      entry: emit({ type: "sync" }),
      after: { heartbeat: { target: "streaming", reenter: true } },
      on: { BLOCKED: { target: "congested" } },
    },
    congested: {
      // Nothing is written here: changes are dropped, and the sync on leaving makes up for them.
      on: { DRAINED: { target: "streaming" } },
      after: { stall: { target: "closed" } },
    },
    closed: {
      type: "final",
      entry: emit({ type: "end" }),
    },
  },
});
