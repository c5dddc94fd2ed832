import { assign, emit, setup } from "xstate";

/**
 * One NATS connection of the bridge (shared by every client that presents the same
 * credentials). Reconnecting and draining are states, so a client actor can ask
 * "may I publish now?" by looking, not by tracking callbacks.
 */
export type NatsConnectionEvent =
  | { type: "CONNECTED"; server: string }
  | { type: "CONNECT_FAILED"; reason: string; auth: boolean }
  | { type: "DISCONNECTED" }
  | { type: "RECONNECTED"; server: string }
  | { type: "RELEASE_LAST" }
  | { type: "CLOSED" };

export type NatsConnectionEmitted =
  | { type: "up"; server: string }
  | { type: "down" }
  | { type: "drain" }
  | { type: "gone"; reason: string };

export const natsConnectionMachine = setup({
  types: {
    context: {} as { server: string; reason: string },
    events: {} as NatsConnectionEvent,
    emitted: {} as NatsConnectionEmitted,
  },
}).createMachine({
  id: "natsConnection",
  context: { server: "", reason: "" },
  initial: "connecting",
  states: {
    connecting: {
      on: {
        CONNECTED: { target: "connected", actions: assign({ server: ({ event }) => event.server }) },
        CONNECT_FAILED: { target: "failed", actions: assign({ reason: ({ event }) => event.reason }) },
        RELEASE_LAST: { target: "draining" },
      },
    },
    connected: {
      entry: emit(({ context }) => ({ type: "up" as const, server: context.server })),
      on: {
        DISCONNECTED: { target: "reconnecting" },
        RELEASE_LAST: { target: "draining" },
        CLOSED: { target: "closed", actions: assign({ reason: "closed by the server or client" }) },
      },
    },
    reconnecting: {
      entry: emit({ type: "down" }),
      on: {
        RECONNECTED: { target: "connected", actions: assign({ server: ({ event }) => event.server }) },
        RELEASE_LAST: { target: "draining" },
        CLOSED: { target: "closed", actions: assign({ reason: "gave up reconnecting" }) },
      },
    },
    draining: {
      entry: emit({ type: "drain" }),
      on: { CLOSED: { target: "closed", actions: assign({ reason: "drained" }) } },
    },
    failed: {
      type: "final",
      entry: emit(({ context }) => ({ type: "gone" as const, reason: context.reason })),
    },
    closed: {
      type: "final",
      entry: emit(({ context }) => ({ type: "gone" as const, reason: context.reason })),
    },
  },
});
