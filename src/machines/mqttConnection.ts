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

export type MqttConnectionEvent =
  | { type: "CONNECT"; request: ConnectRequest }
  | { type: "NATS_READY"; sessionPresent: boolean; account: string }
  | { type: "NATS_REFUSED"; auth: boolean; reason: string; codes?: { v5: number; v4: number } }
  | { type: "KEEPALIVE_EXPIRED" }
  | { type: "CONNECT_TIMEOUT" }
  | { type: "DISCONNECT"; reasonCode: number }
  | { type: "PROTOCOL_ERROR"; reasonCode: number; reason: string }
  | { type: "SOCKET_CLOSED" }
  | { type: "NATS_DOWN" }
  | { type: "NATS_UP" }
  | { type: "KICK" }
  | { type: "TAKEN_OVER" }
  | { type: "LAME_DUCK" }
  | { type: "SHUTDOWN" }
  | { type: "WILL_DONE" };

export type MqttConnectionEmitted =
  | { type: "acquire_nats"; request: ConnectRequest }
  | { type: "connack"; returnCode: number; sessionPresent: boolean }
  | { type: "serve" }
  | { type: "disconnect"; reasonCode: number; reason?: string }
  | { type: "publish_will"; will: WillMessage }
  | { type: "end_socket" }
  | { type: "close" };

export interface MqttConnectionContext {
  readonly connectTimeoutMs: number;
  readonly maxKeepaliveSec: number;
  request?: ConnectRequest;
  closeReason: string;
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
  delays: {
    willGrace: 5_000,
    willDelay: ({ context }) => context.request?.will?.delayMs ?? 0,
  },
  guards: {
    asksForWill: ({ event }) => event.type === "DISCONNECT" && event.reasonCode === 0x04,
    noWill: ({ context }) => context.request?.will === undefined,
  },
}).createMachine({
  id: "mqttConnection",
  context: ({ input }) => ({ ...input, closeReason: "" }),
  initial: "awaitingConnect",
  states: {
    awaitingConnect: {
      on: {
        // `connectTimeoutMs` after the start with no CONNECT: told by the edge's shared clock
        // (keepaliveWheel.ts), as the keep alive is; a delayed event was a timer made and
        // cancelled per connection.
        CONNECT_TIMEOUT: { target: "closed", actions: assign({ closeReason: "no CONNECT in time" }) },
        CONNECT: {
          target: "authenticating",
          actions: [
            assign({ request: ({ event }) => event.request }),
            emit(({ event }) => ({ type: "acquire_nats" as const, request: event.request })),
          ],
        },
        PROTOCOL_ERROR: {
          target: "closed",
          actions: assign({ closeReason: ({ event }) => event.reason }),
        },
        SOCKET_CLOSED: { target: "closed", actions: assign({ closeReason: "socket closed before CONNECT" }) },
        LAME_DUCK: { target: "closed", actions: assign({ closeReason: "lame duck" }) },
        SHUTDOWN: { target: "closed", actions: assign({ closeReason: "shutdown" }) },
      },
    },
    authenticating: {
      on: {
        NATS_READY: {
          target: "serving",
          actions: emit(({ event }) => ({ type: "connack" as const, returnCode: 0, sessionPresent: event.sessionPresent })),
        },
        NATS_REFUSED: {
          target: "closed",
          actions: [
            emit(({ context, event }) => ({
              type: "connack" as const,
              returnCode: event.codes
                ? context.request?.protocolVersion === 5
                  ? event.codes.v5
                  : event.codes.v4
                : refusal(context.request?.protocolVersion, event.auth),
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
    serving: {
      entry: emit({ type: "serve" }),
      type: "parallel",
      states: {
        nats: {
          initial: "online",
          states: {
            online: { on: { NATS_DOWN: { target: "natsDown" } } },
            // Publishes wait (TCP backpressure) rather than being acknowledged unsent.
            natsDown: { on: { NATS_UP: { target: "online" } } },
          },
        },
        // [MQTT-3.1.2-24] no packet for one and a half times the keep alive (`effectiveKeepalive`;
        // 0: never). The edge's shared clock tells (actors/mqtt/keepaliveWheel.ts): a timer per
        // connection, rescheduled on activity, cost every idle connection a Timeout.
        keepalive: {
          initial: "waiting",
          states: {
            waiting: { on: { KEEPALIVE_EXPIRED: { target: "#mqttConnection.keepaliveExpired" } } },
          },
        },
      },
      on: {
        DISCONNECT: [
          // [MQTT-3.14.4-3] a normal DISCONNECT discards the will; v5 0x04 asks for it.
          { guard: "asksForWill", target: "willPending", actions: assign({ closeReason: "DISCONNECT with will" }) },
          { target: "closed", actions: assign({ closeReason: "DISCONNECT" }) },
        ],
        PROTOCOL_ERROR: {
          target: "willPending",
          actions: [
            emit(({ event }) => ({ type: "disconnect" as const, reasonCode: event.reasonCode, reason: event.reason })),
            assign({ closeReason: ({ event }) => event.reason }),
          ],
        },
        SOCKET_CLOSED: { target: "willPending", actions: assign({ closeReason: "connection lost" }) },
        KICK: { target: "kicked" },
        TAKEN_OVER: { target: "takenOver" },
        LAME_DUCK: { target: "lameDuck" },
        SHUTDOWN: { target: "lameDuck" },
      },
    },
    keepaliveExpired: {
      entry: [emit({ type: "disconnect", reasonCode: 0x8d, reason: "keep alive timeout" }), assign({ closeReason: "keep alive expired" })],
      always: { target: "willPending" },
    },
    kicked: {
      entry: [emit({ type: "disconnect", reasonCode: 0x98, reason: "administrative action" }), assign({ closeReason: "kicked" })],
      always: { target: "willPending" },
    },
    takenOver: {
      entry: [emit({ type: "disconnect", reasonCode: 0x8e, reason: "session taken over" }), assign({ closeReason: "session taken over" })],
      always: { target: "willPending" },
    },
    lameDuck: {
      // The gateway closing on its own publishes no will (CONTRACT: shutdown).
      entry: [emit({ type: "disconnect", reasonCode: 0x8b, reason: "server shutting down" }), assign({ closeReason: "server shutting down" })],
      always: { target: "closed" },
    },
    willPending: {
      // The network side is over; only the will may still be owed.
      entry: emit({ type: "end_socket" }),
      always: { guard: "noWill", target: "closed" },
      // [MQTT-3.1.3-9] the will waits for its delay, and a session resumed meanwhile cancels it.
      after: { willDelay: { target: "publishingWill" } },
      on: {
        // [MQTT-3.1.3-9] the same client id connected again in time: no will.
        TAKEN_OVER: { target: "closed", actions: assign({ closeReason: "will cancelled: client reconnected" }) },
        SHUTDOWN: { target: "closed" },
      },
    },
    publishingWill: {
      entry: emit(({ context }) => ({ type: "publish_will" as const, will: context.request!.will! })),
      on: { WILL_DONE: { target: "closed" } },
      // A will that cannot be published (NATS gone) must not hold the actor forever.
      after: { willGrace: { target: "closed" } },
    },
    closed: {
      type: "final",
      entry: emit({ type: "close" }),
    },
  },
});

export function effectiveKeepalive(context: MqttConnectionContext): number {
  const asked = context.request?.keepaliveSec ?? 0;
  // 3.1.1 cannot be told a Server Keep Alive, so its own choice stands.
  if (context.maxKeepaliveSec <= 0 || context.request?.protocolVersion !== 5) return asked;
  // A client asking for "no keep alive" (0) or more than the cap gets the cap (Server Keep Alive).
  return asked === 0 || asked > context.maxKeepaliveSec ? context.maxKeepaliveSec : asked;
}
