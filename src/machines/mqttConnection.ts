import { assign, emit, setup } from "xstate";

/**
 * One MQTT network connection, from the first byte to the close. Per-message work
 * (PUBLISH, acks) runs in the actor's plain functions while this machine is in
 * `serving`; the machine owns everything that changes what the connection *is*:
 * authentication, keep alive, wills, kicks, takeover, lame duck and close.
 */
export interface WillMessage {
  readonly topic: string;
  readonly payload: Uint8Array;
  readonly qos: 0 | 1 | 2;
  readonly retain: boolean;
  readonly delayMs: number;
  readonly properties?: Record<string, unknown>;
}

export interface ConnectRequest {
  readonly protocolVersion: 4 | 5;
  readonly clientId: string;
  readonly keepaliveSec: number;
  readonly cleanStart: boolean;
  readonly sessionExpirySec: number;
  readonly username?: string;
  readonly password?: string;
  readonly will?: WillMessage;
}

/**
 * What the machine decides a connection on: the CONNECT's terms, without the client's
 * identity (client id, credentials, the will's message), which the edge keeps. Connects
 * alike are then one step for every client (stepMemo.ts): a reconnect storm's CONNECT,
 * SESSION_READY and SOCKET_CLOSED are each taken once, not once per device.
 */
export interface ConnectTerms {
  readonly protocolVersion: 4 | 5;
  readonly keepaliveSec: number;
  readonly sessionExpirySec: number;
  /** The will's delay in ms when the CONNECT has a will; none: no will. */
  readonly willDelayMs?: number | undefined;
}

export function termsOf(request: ConnectRequest): ConnectTerms {
  const { protocolVersion, keepaliveSec, sessionExpirySec, will } = request;
  return will
    ? { protocolVersion, keepaliveSec, sessionExpirySec, willDelayMs: will.delayMs }
    : { protocolVersion, keepaliveSec, sessionExpirySec };
}

export type MqttConnectionEvent =
  /** `nats`: the client's NATS access was known at once (its connection up, its account known): no `acquire_nats`. */
  | { type: "CONNECT"; terms: ConnectTerms; nats?: { account: string; natsUp: boolean } | undefined }
  /** The client's own NATS connection is made, its account known (and within its limits); `natsUp`: connected right now. */
  | { type: "NATS_ACQUIRED"; account: string; natsUp: boolean }
  | { type: "NATS_REFUSED"; auth: boolean; reason: string; codes?: { v5: number; v4: number } }
  /** The session machine is attached (mqttSession.ts `ready`). */
  | { type: "SESSION_READY"; sessionPresent: boolean }
  /** The session could not be opened (its store could not be read). */
  | { type: "SESSION_REFUSED"; reason: string }
  | { type: "KEEPALIVE_EXPIRED" }
  | { type: "CONNECT_TIMEOUT" }
  /** `sessionExpirySec`: a v5 DISCONNECT's Session Expiry Interval, when it has one. */
  | { type: "DISCONNECT"; reasonCode: number; sessionExpirySec?: number | undefined }
  | { type: "PROTOCOL_ERROR"; reasonCode: number; reason: string }
  | { type: "SOCKET_CLOSED" }
  | { type: "NATS_DOWN" }
  | { type: "NATS_UP" }
  | { type: "KICK" }
  /**
   * A newer connection took the client id. `resumed`: it resumes this session (Clean Start
   * 0) or starts a new one (1); undefined when that is not known (another gateway, or the
   * session record was written by a newer connection).
   */
  | { type: "TAKEN_OVER"; resumed?: boolean | undefined }
  | { type: "LAME_DUCK" }
  | { type: "SHUTDOWN" }
  | { type: "WILL_DONE" }
  /**
   * `run --workers`: the CONNECT of a session whose home is another worker (its client id's,
   * docs/decisions/session-homes.md) was read here; the socket moves there, unanswered.
   */
  | { type: "HAND_OFF"; worker: number };

/** The commands; the edge holds the CONNECT itself (its client id, credentials and will). */
export type MqttConnectionEmitted =
  | { type: "acquire_nats" }
  | { type: "open_session" }
  | { type: "connack"; returnCode: number; sessionPresent: boolean }
  | { type: "serve" }
  | { type: "disconnect"; reasonCode: number; reason?: string }
  /** The network side is over: the session goes on without this connection (saved or removed). */
  | { type: "detach_session"; expirySec: number }
  | { type: "publish_will" }
  | { type: "end_socket" }
  | { type: "close" }
  /** The socket and what was read of it go to `worker`, which reads the CONNECT again and answers it. */
  | { type: "hand_off"; worker: number };

export interface MqttConnectionContext {
  readonly connectTimeoutMs: number;
  readonly maxKeepaliveSec: number;
  terms?: ConnectTerms;
  /** The session expiry as it stands: the CONNECT's, until a v5 DISCONNECT changes it. */
  sessionExpirySec: number;
  /** The client's account (NATS_ACQUIRED, or the CONNECT's `nats`); its session opens in it. */
  account: string;
  /** Whether the client's NATS connection is up, as last told (NATS_ACQUIRED, NATS_DOWN, NATS_UP). */
  natsUp: boolean;
  closeReason: string;
  /** How the connection was taken over, when it was and that is known. */
  takenOverBy?: "resume" | "clean start" | undefined;
}

/** CONNACK codes of both protocol versions for the refusals the gateway makes. */
const refusal = (version: 4 | 5 | undefined, auth: boolean): number =>
  version === 5 ? (auth ? 0x86 : 0x88) : auth ? 0x04 : 0x03;

export const mqttConnectionMachine = setup({
  types: {
    context: {} as MqttConnectionContext,
    events: {} as MqttConnectionEvent,
    emitted: {} as MqttConnectionEmitted,
    input: {} as { connectTimeoutMs: number; maxKeepaliveSec: number },
  },
  actions: {
    keepTerms: assign({
      terms: ({ event }) => (event.type === "CONNECT" ? event.terms : undefined),
      sessionExpirySec: ({ event }) => (event.type === "CONNECT" ? event.terms.sessionExpirySec : 0),
    }),
    connackAccepted: emit(({ event }) => ({
      type: "connack" as const,
      returnCode: 0,
      sessionPresent: event.type === "SESSION_READY" && event.sessionPresent,
    })),
  },
  delays: {
    willGrace: 5_000,
    // [MQTT-3.1.3-9] MQTT 5 3.1.3.2.2: the will goes at the end of its delay or of the
    // session, whichever comes first; a session that ends with the connection sends it at once.
    // A takeover by a clean start ends the session now.
    willDelay: ({ context }) =>
      context.takenOverBy === "clean start"
        ? 0
        : Math.min(context.terms?.willDelayMs ?? 0, context.sessionExpirySec * 1000),
  },
  guards: {
    asksForWill: ({ event }) => event.type === "DISCONNECT" && event.reasonCode === 0x04,
    noWill: ({ context }) => context.terms?.willDelayMs === undefined,
    // [MQTT-3.1.3-9] MQTT 5 3.1.3.2.2 (non-normative): on takeover the will is sent unless the new
    // connection resumes the session and the will has a delay; a delay of 0 sends it at the close.
    willCancelledByResume: ({ context }) => context.takenOverBy === "resume" && (context.terms?.willDelayMs ?? 0) > 0,
    newSessionStarted: ({ event }) => event.type === "TAKEN_OVER" && event.resumed === false,
    // [MQTT-3.14.2-2] a session that was to end with the connection cannot be made to outlive it.
    natsIsDown: ({ context }) => !context.natsUp,
    natsKnown: ({ event }) => event.type === "CONNECT" && event.nats !== undefined,
    raisesExpiryFromZero: ({ context, event }) =>
      event.type === "DISCONNECT" && (event.sessionExpirySec ?? 0) > 0 && (context.terms?.sessionExpirySec ?? 0) === 0,
  },
}).createMachine({
  id: "mqttConnection",
  context: ({ input }) => ({ ...input, sessionExpirySec: 0, account: "", natsUp: true, closeReason: "" }),
  initial: "awaitingConnect",
  // Outside serving (while the session opens) the state of NATS is only remembered.
  on: {
    NATS_DOWN: { actions: assign({ natsUp: false }) },
    NATS_UP: { actions: assign({ natsUp: true }) },
  },
  states: {
    // Tags the edge asks for on every read (a Set lookup; `matches` allocates a path per call).
    awaitingConnect: {
      tags: ["awaitingConnect"],
      on: {
        // `connectTimeoutMs` after the start with no CONNECT: told by the edge's shared clock
        // (keepaliveWheel.ts), as the keep alive is; a delayed event was a timer made and
        // cancelled per connection.
        CONNECT_TIMEOUT: { target: "closed", actions: assign({ closeReason: "no CONNECT in time" }) },
        CONNECT: [
          // The edge had the client's NATS access at hand: one step fewer per connect.
          {
            guard: "natsKnown",
            target: "session",
            // One assign: each clones the snapshot (xstate), and every connect takes this.
            actions: assign({
              terms: ({ event }) => event.terms,
              sessionExpirySec: ({ event }) => event.terms.sessionExpirySec,
              natsUp: ({ event }) => event.nats?.natsUp ?? true,
              account: ({ event }) => event.nats?.account ?? "",
            }),
          },
          {
            target: "authenticating",
            actions: ["keepTerms", emit({ type: "acquire_nats" })],
          },
        ],
        PROTOCOL_ERROR: {
          target: "closed",
          actions: assign({ closeReason: ({ event }) => event.reason }),
        },
        SOCKET_CLOSED: { target: "closed", actions: assign({ closeReason: "socket closed before CONNECT" }) },
        LAME_DUCK: { target: "closed", actions: assign({ closeReason: "lame duck" }) },
        SHUTDOWN: { target: "closed", actions: assign({ closeReason: "shutdown" }) },
        // Before anything of the CONNECT is acted on: no NATS login, no session, no CONNACK here.
        HAND_OFF: {
          target: "handedOff",
          actions: [
            emit(({ event }) => ({ type: "hand_off" as const, worker: event.worker })),
            assign({ closeReason: ({ event }) => `handed to worker ${event.worker}, its session's home` }),
          ],
        },
      },
    },
    authenticating: {
      tags: ["awaitingConnack"],
      on: {
        NATS_ACQUIRED: {
          target: "session",
          actions: assign({ natsUp: ({ event }) => event.natsUp, account: ({ event }) => event.account }),
        },
        NATS_REFUSED: {
          target: "closed",
          actions: [
            emit(({ context, event }) => ({
              type: "connack" as const,
              returnCode: event.codes
                ? context.terms?.protocolVersion === 5
                  ? event.codes.v5
                  : event.codes.v4
                : refusal(context.terms?.protocolVersion, event.auth),
              sessionPresent: false,
            })),
            assign({ closeReason: ({ event }) => `NATS refused: ${event.reason}` }),
          ],
        },
        SOCKET_CLOSED: { target: "closed", actions: assign({ closeReason: "socket closed while authenticating" }) },
        PROTOCOL_ERROR: { target: "closed", actions: assign({ closeReason: ({ event }) => event.reason }) },
        LAME_DUCK: { target: "closed", actions: assign({ closeReason: "lame duck" }) },
        SHUTDOWN: { target: "closed", actions: assign({ closeReason: "shutdown" }) },
        TAKEN_OVER: { target: "closed", actions: assign({ closeReason: "taken over while authenticating" }) },
      },
    },
    // From the session's start to the end of the network side: leaving it, for whatever
    // reason, detaches the session, which then goes on alone until it is saved or removed.
    session: {
      initial: "opening",
      exit: emit(({ context, event }) => ({
        type: "detach_session" as const,
        expirySec: expiryAtDetach(context, event),
      })),
      states: {
        opening: {
          tags: ["awaitingConnack"],
          entry: emit({ type: "open_session" }),
          on: {
            // Straight into NATS's state as it is now: one microstep fewer per connect than a transient state.
            SESSION_READY: [
              { guard: "natsIsDown", target: "serving.natsDown", actions: "connackAccepted" },
              { target: "serving", actions: "connackAccepted" },
            ],
            SESSION_REFUSED: {
              target: "#mqttConnection.closed",
              actions: [
                emit(({ context }) => ({
                  type: "connack" as const,
                  returnCode: refusal(context.terms?.protocolVersion, false),
                  sessionPresent: false,
                })),
                assign({ closeReason: ({ event }) => `session store: ${event.reason}` }),
              ],
            },
            SOCKET_CLOSED: {
              target: "#mqttConnection.closed",
              actions: assign({ closeReason: "socket closed while the session opened" }),
            },
            PROTOCOL_ERROR: {
              target: "#mqttConnection.closed",
              actions: assign({ closeReason: ({ event }) => event.reason }),
            },
            LAME_DUCK: { target: "#mqttConnection.closed", actions: assign({ closeReason: "lame duck" }) },
            SHUTDOWN: { target: "#mqttConnection.closed", actions: assign({ closeReason: "shutdown" }) },
            TAKEN_OVER: {
              target: "#mqttConnection.closed",
              actions: assign({ closeReason: "taken over while the session opened" }),
            },
            KICK: {
              target: "#mqttConnection.closed",
              actions: assign({ closeReason: "kicked while the session opened" }),
            },
          },
        },
        serving: {
          entry: emit({ type: "serve" }),
          // Packets are read and handled only here (the edge reads the tag).
          tags: ["serving"],
          // NATS as it is now: publishes wait while it is away (TCP backpressure: the edge stops
          // reading) rather than being acknowledged unsent.
          initial: "online",
          states: {
            online: { on: { NATS_DOWN: { target: "natsDown", actions: assign({ natsUp: false }) } } },
            natsDown: { tags: ["natsDown"], on: { NATS_UP: { target: "online", actions: assign({ natsUp: true }) } } },
          },
          on: {
            // [MQTT-3.1.2-24] no packet for one and a half times the keep alive (`effectiveKeepalive`;
            // 0: never). The edge's shared clock tells (actors/mqtt/keepaliveWheel.ts): a timer per
            // connection, rescheduled on activity, cost every idle connection a Timeout. An event of
            // serving, not a region: a region of one state was two state nodes more in every
            // snapshot of every connection.
            KEEPALIVE_EXPIRED: { target: "#mqttConnection.keepaliveExpired" },
            DISCONNECT: [
              {
                guard: "raisesExpiryFromZero",
                target: "#mqttConnection.willPending",
                actions: [
                  emit({
                    type: "disconnect",
                    reasonCode: 0x82,
                    reason: "session expiry set on DISCONNECT after 0 at CONNECT",
                  }),
                  assign({ closeReason: "protocol error: session expiry raised on DISCONNECT" }),
                ],
              },
              // [MQTT-3.14.4-3] a normal DISCONNECT discards the will; v5 0x04 asks for it.
              {
                guard: "asksForWill",
                target: "#mqttConnection.willPending",
                actions: assign({
                  closeReason: "DISCONNECT with will",
                  sessionExpirySec: ({ context, event }) => event.sessionExpirySec ?? context.sessionExpirySec,
                }),
              },
              { target: "#mqttConnection.closed", actions: assign({ closeReason: "DISCONNECT" }) },
            ],
            PROTOCOL_ERROR: {
              target: "#mqttConnection.willPending",
              actions: [
                emit(({ event }) => ({
                  type: "disconnect" as const,
                  reasonCode: event.reasonCode,
                  reason: event.reason,
                })),
                assign({ closeReason: ({ event }) => event.reason }),
              ],
            },
            // No will owed: over at once (a blip drops thousands of connections together, and
            // willPending's delay would be started and cancelled for each of them).
            SOCKET_CLOSED: [
              {
                guard: "noWill",
                target: "#mqttConnection.closed",
                actions: [emit({ type: "end_socket" }), assign({ closeReason: "connection lost" })],
              },
              { target: "#mqttConnection.willPending", actions: assign({ closeReason: "connection lost" }) },
            ],
            KICK: { target: "#mqttConnection.kicked" },
            TAKEN_OVER: {
              target: "#mqttConnection.takenOver",
              actions: assign({
                takenOverBy: ({ event }) =>
                  event.resumed === undefined ? undefined : event.resumed ? "resume" : "clean start",
              }),
            },
            LAME_DUCK: { target: "#mqttConnection.lameDuck" },
            SHUTDOWN: { target: "#mqttConnection.lameDuck" },
          },
        },
      },
    },
    keepaliveExpired: {
      entry: [
        emit({ type: "disconnect", reasonCode: 0x8d, reason: "keep alive timeout" }),
        assign({ closeReason: "keep alive expired" }),
      ],
      always: { target: "willPending" },
    },
    kicked: {
      entry: [
        emit({ type: "disconnect", reasonCode: 0x98, reason: "administrative action" }),
        assign({ closeReason: "kicked" }),
      ],
      always: { target: "willPending" },
    },
    takenOver: {
      entry: [
        emit({ type: "disconnect", reasonCode: 0x8e, reason: "session taken over" }),
        assign({ closeReason: "session taken over" }),
      ],
      always: [
        {
          guard: "willCancelledByResume",
          target: "closed",
          actions: assign({ closeReason: "session taken over; will cancelled: session resumed" }),
        },
        { target: "willPending" },
      ],
    },
    lameDuck: {
      // The gateway closing on its own publishes no will (CONTRACT: shutdown).
      entry: [
        emit({ type: "disconnect", reasonCode: 0x8b, reason: "server shutting down" }),
        assign({ closeReason: "server shutting down" }),
      ],
      always: { target: "closed" },
    },
    willPending: {
      // The network side is over; only the will may still be owed.
      entry: emit({ type: "end_socket" }),
      always: { guard: "noWill", target: "closed" },
      // [MQTT-3.1.3-9] the will waits for its delay, and a session resumed meanwhile cancels it.
      after: { willDelay: { target: "publishingWill" } },
      on: {
        // [MQTT-3.1.3-9] the same client id connected again in time and resumed the session: no
        // will; a clean start ended the session, and the will goes now.
        TAKEN_OVER: [
          { guard: "newSessionStarted", target: "publishingWill" },
          { target: "closed", actions: assign({ closeReason: "will cancelled: client reconnected" }) },
        ],
        SHUTDOWN: { target: "closed" },
      },
    },
    publishingWill: {
      entry: emit({ type: "publish_will" }),
      on: { WILL_DONE: { target: "closed" } },
      // A will that cannot be published (NATS gone) must not hold the actor forever.
      after: { willGrace: { target: "closed" } },
    },
    closed: {
      type: "final",
      entry: emit({ type: "close" }),
    },
    // Over here, not closed: the socket is served on, by its session's home worker.
    handedOff: { type: "final" },
  },
});

/**
 * MQTT 5 3.14.2.2.2: a DISCONNECT's Session Expiry Interval replaces the CONNECT's, unless
 * the CONNECT's was 0 (then raising it is a protocol error, and the session still ends).
 */
function expiryAtDetach(context: MqttConnectionContext, event: MqttConnectionEvent): number {
  if (event.type !== "DISCONNECT" || event.sessionExpirySec === undefined) return context.sessionExpirySec;
  return (context.terms?.sessionExpirySec ?? 0) > 0 ? event.sessionExpirySec : 0;
}

export function effectiveKeepalive(context: MqttConnectionContext): number {
  const asked = context.terms?.keepaliveSec ?? 0;
  // 3.1.1 cannot be told a Server Keep Alive, so its own choice stands.
  if (context.maxKeepaliveSec <= 0 || context.terms?.protocolVersion !== 5) return asked;
  // A client asking for "no keep alive" (0) or more than the cap gets the cap (Server Keep Alive).
  return asked === 0 || asked > context.maxKeepaliveSec ? context.maxKeepaliveSec : asked;
}
