import { assign, emit, setup } from "xstate";

/**
 * The MQTT session behind one connection, from the sessions bucket to the end: found or
 * fresh, taken from another gateway, discarded on clean start or expiry, resumed, and at
 * the end kept (expiry > 0) or removed. The connection machine decides *that* the client
 * is served; this machine decides *what state it resumes and leaves behind*.
 */
export interface SessionFound {
  readonly exists: boolean;
  readonly expired: boolean;
  /** Another gateway holds a live connection of this client. */
  readonly heldBy?: string | undefined;
}

export type MqttSessionEvent =
  | { type: "LOADED"; found: SessionFound }
  | { type: "LOAD_FAILED"; reason: string }
  | { type: "OWNER_RELEASED" }
  | { type: "DISCARDED" }
  | { type: "RESUMED" }
  | { type: "DETACH" }
  | { type: "SAVED" }
  | { type: "REMOVED" };

export type MqttSessionEmitted =
  | { type: "load" }
  | { type: "ask_owner"; owner: string }
  | { type: "discard" }
  | { type: "resume" }
  | { type: "ready"; sessionPresent: boolean }
  | { type: "refuse"; reason: string }
  | { type: "stop_delivery" }
  | { type: "save_detached" }
  | { type: "remove" };

export interface MqttSessionContext {
  readonly cleanStart: boolean;
  /**
   * The edge knows before starting that the store holds nothing to clear (a clean start
   * whose client id has no key in the account's bucket, docs/decisions/mqtt-sessions.md):
   * the session is fresh at once, without a load (one macrostep per CONNECT instead of three).
   */
  readonly nothingStored?: boolean | undefined;
  readonly expirySec: number;
  found: SessionFound;
  reason: string;
}

const nothing: SessionFound = { exists: false, expired: false };

export const mqttSessionMachine = setup({
  types: {
    context: {} as MqttSessionContext,
    events: {} as MqttSessionEvent,
    emitted: {} as MqttSessionEmitted,
    input: {} as { cleanStart: boolean; expirySec: number; nothingStored?: boolean },
  },
  delays: {
    // A gateway that does not answer in time is taken for dead (CONTRACT: taken over when that gateway is dead).
    ownerTimeout: 2_000,
    storeTimeout: 5_000,
  },
  guards: {
    heldElsewhere: ({ event }) => event.type === "LOADED" && event.found.heldBy !== undefined,
    mustDiscard: ({ context }) => context.found.exists && (context.cleanStart || context.found.expired),
    canResume: ({ context }) => context.found.exists && !context.cleanStart && !context.found.expired,
    cleanStart: ({ context }) => context.cleanStart,
    nothingStored: ({ context }) => context.cleanStart && context.nothingStored === true,
    durable: ({ context }) => context.expirySec > 0,
  },
}).createMachine({
  id: "mqttSession",
  context: ({ input }) => ({ ...input, found: nothing, reason: "" }),
  initial: "starting",
  states: {
    starting: {
      always: [{ guard: "nothingStored", target: "fresh" }, { target: "loading" }],
    },
    loading: {
      entry: emit({ type: "load" }),
      on: {
        LOADED: [
          {
            guard: "heldElsewhere",
            target: "takingOver",
            actions: assign({ found: ({ event }) => event.found }),
          },
          { target: "deciding", actions: assign({ found: ({ event }) => event.found }) },
        ],
        LOAD_FAILED: [
          // A clean start needs nothing from the store: serve it fresh.
          { guard: "cleanStart", target: "fresh" },
          { target: "refused", actions: assign({ reason: ({ event }) => event.reason }) },
        ],
        DETACH: { target: "ended" },
      },
    },
    takingOver: {
      // [MQTT-3.1.4-3] close the other connection first; its gateway answers on $MQG.alive.<id>.
      entry: emit(({ context }) => ({ type: "ask_owner" as const, owner: context.found.heldBy ?? "" })),
      on: { OWNER_RELEASED: { target: "deciding" }, DETACH: { target: "ended" } },
      after: { ownerTimeout: { target: "deciding" } },
    },
    deciding: {
      always: [
        { guard: "mustDiscard", target: "discarding" },
        { guard: "canResume", target: "resuming" },
        { target: "fresh" },
      ],
    },
    discarding: {
      entry: emit({ type: "discard" }),
      on: { DISCARDED: { target: "fresh" }, DETACH: { target: "ended" } },
      after: { storeTimeout: { target: "fresh" } },
    },
    resuming: {
      entry: emit({ type: "resume" }),
      on: { RESUMED: { target: "resumed" }, DETACH: { target: "detaching" } },
    },
    fresh: {
      entry: emit({ type: "ready", sessionPresent: false }),
      always: { target: "attached" },
    },
    resumed: {
      entry: emit({ type: "ready", sessionPresent: true }),
      always: { target: "attached" },
    },
    attached: {
      on: { DETACH: { target: "detaching" } },
    },
    detaching: {
      entry: emit({ type: "stop_delivery" }),
      always: [{ guard: "durable", target: "saving" }, { target: "removing" }],
    },
    saving: {
      entry: emit({ type: "save_detached" }),
      on: { SAVED: { target: "kept" } },
      after: { storeTimeout: { target: "kept" } },
    },
    removing: {
      entry: emit({ type: "remove" }),
      on: { REMOVED: { target: "ended" } },
      after: { storeTimeout: { target: "ended" } },
    },
    refused: {
      type: "final",
      entry: emit(({ context }) => ({ type: "refuse" as const, reason: context.reason })),
    },
    kept: { type: "final" },
    ended: { type: "final" },
  },
});
