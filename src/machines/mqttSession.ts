import { and, assign, emit, setup } from "xstate";

/**
 * The MQTT session behind one connection, from the claim on its client id to the end: it
 * waits for any earlier session of the same client id to be saved or removed (here, or on
 * the gateway that held it), then is found or fresh, discarded on clean start or expiry,
 * resumed, and at the end kept (expiry > 0) or removed. The connection machine decides
 * *that* the client is served; this machine decides *what state it resumes and leaves
 * behind*, and that two sessions of one client id never overlap.
 */
export interface SessionFound {
  readonly exists: boolean;
  readonly expired: boolean;
  /**
   * Another gateway holds a live connection of this client, or its connection ended there
   * moments ago and its readers may still be parked there (sessionHolder.ts): asked first.
   */
  readonly heldBy?: string | undefined;
}

export type MqttSessionEvent =
  /** No earlier session of this client id is still open on this gateway. */
  | { type: "CLAIMED" }
  | { type: "LOADED"; found: SessionFound }
  /** `waitable`: the store did not answer (a timeout, no responders, a leader being elected), as opposed to refusing. */
  | { type: "LOAD_FAILED"; reason: string; waitable: boolean }
  /** The gateway that held the session closed its connection and saved or removed the session. */
  | { type: "OWNER_RELEASED" }
  /** That gateway did not answer: it is gone, and what it held is handed back on resume. */
  | { type: "OWNER_GONE" }
  | { type: "DISCARDED" }
  | { type: "RESUMED" }
  /** The connection ended; `expirySec` is the session expiry then (a v5 DISCONNECT may change it). */
  | { type: "DETACH"; expirySec: number }
  | { type: "SAVED" }
  | { type: "REMOVED" };

export type MqttSessionEmitted =
  | { type: "claim" }
  /** `resume`: not a clean start, so a record parked on this gateway may be held in place of a read. */
  | { type: "load"; resume: boolean }
  | { type: "ask_owner"; owner: string }
  | { type: "discard" }
  | { type: "resume" }
  | { type: "ready"; sessionPresent: boolean }
  | { type: "refuse"; reason: string }
  | { type: "stop_delivery" }
  | { type: "save_detached"; expirySec: number }
  | { type: "remove" };

export interface MqttSessionContext {
  readonly cleanStart: boolean;
  /**
   * The edge knows before starting that the store holds nothing to clear (a clean start
   * whose client id has no key in the account's bucket, docs/decisions/mqtt-sessions.md):
   * the session is fresh once claimed, without a load.
   */
  readonly nothingStored?: boolean | undefined;
  /**
   * No earlier session of the client id was open on this gateway when this one started:
   * the claim it makes first is granted at once, and the machine goes on in its first step
   * (CLAIMED would be one more step on every connect).
   */
  readonly claimedAtStart?: boolean | undefined;
  /** The session expiry asked at CONNECT; a session with one is in the store while it lives. */
  readonly connectExpirySec: number;
  /** The expiry as it stands now (DETACH brings the DISCONNECT's). */
  expirySec: number;
  /**
   * This connection resumed a session from the store: the store holds it while it lives,
   * whatever this CONNECT's expiry (MQTT 5 3.1.2.11.2: with 0 it ends with this connection).
   */
  resumed?: boolean;
  found: SessionFound;
  reason: string;
  /** Reads of the store that did not answer, this CONNECT (the wait between reads doubles). */
  loadAttempts: number;
}

const nothing: SessionFound = { exists: false, expired: false };

/** What the store holds: the LOADED event being taken (its actions have not kept it yet), or what was kept. */
function foundBy(context: MqttSessionContext, event: MqttSessionEvent): SessionFound {
  return event.type === "LOADED" ? event.found : context.found;
}

/**
 * Discard, resume or start fresh, as the store's answer says: taken on the LOADED event
 * itself where it can be (a microstep less per connect: xstate's steps are about a quarter
 * of a resume's CPU), and by `deciding` after a takeover whose other gateway is gone.
 */
const decide = [
  { guard: "mustDiscard", target: "#mqttSession.discarding", actions: "keepFound" },
  { guard: "canResume", target: "#mqttSession.resuming", actions: "keepFoundResumed" },
  { target: "#mqttSession.attached", actions: ["keepFound", "readyFresh"] },
] as const;

/**
 * The connection ended: delivery stops, and the session is saved (it outlives the
 * connection), removed (it was in the store and ends with it) or just ends. Decided on the
 * DETACH itself, whose expiry is the one that counts (MQTT 5 3.14.2.2.2): a microstep less
 * for every connection a blip drops.
 */
const detach = [
  { guard: "detachesDurable", target: "#mqttSession.saving", actions: ["keepDetachExpiry", "stopDelivery"] },
  { guard: "wasStored", target: "#mqttSession.removing", actions: "stopDelivery" },
  { target: "#mqttSession.ended", actions: "stopDelivery" },
] as const;

/** How long a CONNECT waits for a session store that does not answer (docs/decisions/faults.md). */
export const LOAD_PATIENCE_MS = 15_000;

/**
 * Reading the store as a CONNECT waits on it: a read the store did not answer is tried
 * again (250 ms doubling to 2 s) until `loadPatience`, then CONNACK "server unavailable";
 * a refusal (the gateway user may not read it) is final at once.
 */
function patientLoad<const Loaded>(loaded: Loaded, cleanStartFailed: `#mqttSession.${string}`) {
  return {
    initial: "reading",
    entry: "restartAttempts",
    after: { loadPatience: { target: "#mqttSession.refused", actions: "storeSilent" } },
    on: { DETACH: { target: "#mqttSession.ended" } },
    states: {
      reading: {
        entry: "load",
        on: {
          LOADED: loaded,
          LOAD_FAILED: [
            { guard: "cleanStart", target: cleanStartFailed },
            { guard: "waitable", target: "waiting", actions: ["keepReason", "countAttempt"] },
            { target: "#mqttSession.refused", actions: "keepReason" },
          ],
        },
      },
      waiting: { after: { loadRetry: { target: "reading" } } },
    },
  } as const;
}

export const mqttSessionMachine = setup({
  types: {
    context: {} as MqttSessionContext,
    events: {} as MqttSessionEvent,
    emitted: {} as MqttSessionEmitted,
    input: {} as { cleanStart: boolean; expirySec: number; nothingStored?: boolean; claimedAtStart?: boolean },
  },
  actions: {
    readyFresh: emit({ type: "ready", sessionPresent: false }),
    load: emit(({ context }) => ({ type: "load" as const, resume: !context.cleanStart })),
    keepDetachExpiry: assign({
      expirySec: ({ context, event }) => (event.type === "DETACH" ? event.expirySec : context.expirySec),
    }),
    stopDelivery: emit({ type: "stop_delivery" }),
    keepFound: assign({ found: ({ context, event }) => foundBy(context, event) }),
    // The only way into `resuming`: one assign, since each clones the snapshot (xstate), on every resume.
    keepFoundResumed: assign({ found: ({ context, event }) => foundBy(context, event), resumed: true }),
    restartAttempts: assign({ loadAttempts: 0 }),
    // Counted up to where the wait stops growing: a model checker sees a bounded state.
    countAttempt: assign({ loadAttempts: ({ context }) => Math.min(4, context.loadAttempts + 1) }),
    keepReason: assign({ reason: ({ event }) => (event.type === "LOAD_FAILED" ? event.reason : "") }),
    storeSilent: assign({
      reason: ({ context }) =>
        `the session store did not answer within ${LOAD_PATIENCE_MS / 1000} s (${context.reason || "no answer"})`,
    }),
  },
  delays: {
    // A gateway that does not answer in time is taken for dead (CONTRACT: taken over when that gateway is dead).
    // Past the asker's own bounds (liveness.ts: a 1 s ping, then the owner's release).
    ownerTimeout: 8_000,
    storeTimeout: 5_000,
    // How long a CONNECT waits for a store that does not answer before CONNACK "server
    // unavailable": a sessions bucket electing a leader after a node loss takes a few
    // seconds; mqtt.js gives up on CONNACK after 30.
    loadPatience: LOAD_PATIENCE_MS,
    loadRetry: ({ context }) => Math.min(2_000, 250 * 2 ** (context.loadAttempts - 1)),
  },
  guards: {
    heldElsewhere: ({ event }) => event.type === "LOADED" && event.found.heldBy !== undefined,
    mustDiscard: ({ context, event }) => {
      const found = foundBy(context, event);
      return found.exists && (context.cleanStart || found.expired);
    },
    canResume: ({ context, event }) => {
      const found = foundBy(context, event);
      return found.exists && !context.cleanStart && !found.expired;
    },
    cleanStart: ({ context }) => context.cleanStart,
    waitable: ({ event }) => event.type === "LOAD_FAILED" && event.waitable,
    nothingStored: ({ context }) => context.cleanStart && context.nothingStored === true,
    claimedAtStart: ({ context }) => context.claimedAtStart === true,
    detachesDurable: ({ event }) => event.type === "DETACH" && event.expirySec > 0,
    // A session that was in the store (expiry at CONNECT, or resumed from it) and ends without expiry leaves it.
    wasStored: ({ context }) => context.connectExpirySec > 0 || context.resumed === true,
  },
}).createMachine({
  id: "mqttSession",
  context: ({ input }) => ({
    cleanStart: input.cleanStart,
    nothingStored: input.nothingStored,
    claimedAtStart: input.claimedAtStart,
    connectExpirySec: input.expirySec,
    expirySec: input.expirySec,
    found: nothing,
    reason: "",
    loadAttempts: 0,
  }),
  initial: "claiming",
  states: {
    claiming: {
      tags: ["claiming"],
      // [MQTT-3.1.4-3] the earlier connection of this client id goes first, and its session is
      // saved or removed before this one reads the store: the two never act on it at once.
      entry: emit({ type: "claim" }),
      // Claimed as it claimed (the claim was granted before any other event could come).
      always: [
        { guard: and(["claimedAtStart", "nothingStored"]), target: "attached", actions: "readyFresh" },
        { guard: "claimedAtStart", target: "loading" },
      ],
      on: {
        CLAIMED: [
          // A clean start with nothing stored is served at once, in the one microstep a connect
          // can afford (xstate allocates about 10 KB per microstep of this machine).
          { guard: "nothingStored", target: "attached", actions: "readyFresh" },
          { target: "loading" },
        ],
        DETACH: { target: "ended" },
      },
    },
    // A clean start needs nothing from the store: served fresh when the store fails.
    loading: patientLoad(
      [{ guard: "heldElsewhere", target: "#mqttSession.takingOver", actions: "keepFound" }, ...decide],
      "#mqttSession.fresh",
    ),
    takingOver: {
      // [MQTT-3.1.4-3] close the other connection first; its gateway answers on $MQG.alive.<id>
      // once that connection's session is saved, so what is read next is what it left.
      entry: emit(({ context }) => ({ type: "ask_owner" as const, owner: context.found.heldBy ?? "" })),
      on: {
        OWNER_RELEASED: { target: "reloading" },
        OWNER_GONE: { target: "deciding" },
        DETACH: { target: "ended" },
      },
      after: { ownerTimeout: { target: "deciding" } },
    },
    // A clean start still clears what the first read found.
    reloading: patientLoad(decide, "#mqttSession.deciding"),
    // The other gateway is gone or did not answer: what the first read found decides.
    deciding: { always: decide },
    discarding: {
      entry: emit({ type: "discard" }),
      on: { DISCARDED: { target: "fresh" }, DETACH: { target: "ended" } },
      after: { storeTimeout: { target: "fresh" } },
    },
    resuming: {
      // Subscriptions and consumers reopen before CONNACK (what they receive waits for it);
      // what the client left unacknowledged is handed back in order (storedDelivery.ts).
      entry: emit({ type: "resume" }),
      on: {
        RESUMED: { target: "attached", actions: emit({ type: "ready", sessionPresent: true }) },
        DETACH: detach,
      },
    },
    fresh: {
      entry: "readyFresh",
      always: { target: "attached" },
    },
    attached: {
      on: { DETACH: detach },
    },
    // Detached (a DETACH took the session here): a later DETACH is nothing to this session.
    saving: {
      tags: ["detached"],
      entry: emit(({ context }) => ({ type: "save_detached" as const, expirySec: context.expirySec })),
      on: { SAVED: { target: "kept" } },
      after: { storeTimeout: { target: "kept" } },
    },
    removing: {
      tags: ["detached"],
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
