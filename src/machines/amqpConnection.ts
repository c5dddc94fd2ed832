import { assign, emit, setup } from "xstate";

/**
 * One AMQP 1.0 network connection, from the protocol header to the close. rhea parses
 * frames and answers the open; this machine owns what the connection *is*: which header
 * it spoke, the login (SASL, then the client's own NATS connection), the idle timeout,
 * kicks, lame duck and the close. Links are actors of their own (amqpLink.ts) that run
 * while this machine is `serving`.
 */
/** What a client logs in to NATS with (the bridge takes these as they are). */
export interface ClientCredentials {
  readonly user?: string | undefined;
  readonly pass?: string | undefined;
  readonly token?: string | undefined;
}

export interface Login {
  readonly credentials: ClientCredentials;
  /** The SASL PLAIN username, or the EXTERNAL certificate's name: for the routing table. */
  readonly username?: string | undefined;
  readonly mechanism: "PLAIN" | "ANONYMOUS" | "EXTERNAL" | "none";
}

export interface CloseError {
  readonly condition: string;
  readonly description: string;
}

export type AmqpConnectionEvent =
  | { type: "HEADER"; sasl: boolean }
  | { type: "HEADER_MISMATCH"; description: string }
  | { type: "AUTHENTICATE"; login: Login }
  /**
   * rhea already answered SASL's `auth` outcome without asking NATS: a malformed PLAIN
   * response, EXTERNAL without a verified certificate, a mechanism not offered. The client
   * gets the same short grace to hang up as one NATS refused.
   */
  | { type: "SASL_REFUSED"; reason: string }
  | { type: "NATS_READY"; account: string }
  | { type: "NATS_REFUSED"; auth: boolean; reason: string }
  /**
   * NATS took the login, but a gateway limit (limits.max_connections_per_account) does
   * not let the client in: SASL succeeds and the open is answered with a close carrying
   * `error`, as RabbitMQ answers its connection limits (docs/decisions/amqp-connections.md).
   */
  | { type: "LIMIT_REFUSED"; error: CloseError }
  | { type: "OPENED"; containerId: string }
  | { type: "ACTIVITY" }
  | { type: "REMOTE_CLOSE" }
  | { type: "PROTOCOL_ERROR"; error: CloseError }
  | { type: "SOCKET_CLOSED" }
  | { type: "KICK" }
  | { type: "SHUTDOWN" };

export type AmqpConnectionEmitted =
  | { type: "acquire_nats"; login: Login }
  /** Answers the SASL exchange; a refusal is SASL's own `auth` outcome. */
  | { type: "sasl_outcome"; ok: boolean }
  /** Writes the gateway's protocol header, then ends the socket (AMQP part 2, 2.2). */
  | { type: "answer_header" }
  | { type: "serve" }
  | { type: "close_connection"; error?: CloseError }
  | { type: "close" };

export interface AmqpConnectionContext {
  readonly handshakeTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly closeGraceMs: number;
  sasl: boolean;
  /** The client's open arrived (rhea has answered it). */
  opened: boolean;
  containerId: string;
  closeReason: string;
  /** What the close says once the open arrives, when the login was refused. */
  closeError?: CloseError;
}

const unauthorized = (reason: string): CloseError => ({ condition: "amqp:unauthorized-access", description: reason });

export const amqpConnectionMachine = setup({
  types: {
    context: {} as AmqpConnectionContext,
    events: {} as AmqpConnectionEvent,
    emitted: {} as AmqpConnectionEmitted,
    input: {} as { handshakeTimeoutMs: number; idleTimeoutMs: number; closeGraceMs: number },
  },
  delays: {
    handshake: ({ context }) => context.handshakeTimeoutMs,
    // AMQP part 2, 2.4.5: a peer that hears nothing for its idle-time-out may close.
    idle: ({ context }) => context.idleTimeoutMs,
    closeGrace: ({ context }) => context.closeGraceMs,
  },
  actions: {
    holdLimitError: assign(({ event }) =>
      event.type === "LIMIT_REFUSED" ? { closeReason: event.error.description, closeError: event.error } : {},
    ),
  },
  guards: {
    viaSasl: ({ context }) => context.sasl,
    opened: ({ context }) => context.opened,
    saslHeader: ({ event }) => event.type === "HEADER" && event.sasl,
  },
}).createMachine({
  id: "amqpConnection",
  context: ({ input }) => ({ ...input, sasl: false, opened: false, containerId: "", closeReason: "" }),
  initial: "awaitingHeader",
  on: {
    // Wherever it happens, a lost socket ends the connection.
    SOCKET_CLOSED: {
      target: ".closed",
      actions: assign({ closeReason: ({ context }) => context.closeReason || "socket closed" }),
    },
  },
  states: {
    awaitingHeader: {
      after: { handshake: { target: "closed", actions: assign({ closeReason: "no protocol header in time" }) } },
      on: {
        HEADER: [
          { guard: "saslHeader", target: "saslExchange", actions: assign({ sasl: true }) },
          {
            // No SASL layer: the client is anonymous (allowed only when ANONYMOUS is offered).
            target: "authenticating",
            actions: emit({ type: "acquire_nats", login: { credentials: {}, mechanism: "none" } }),
          },
        ],
        HEADER_MISMATCH: {
          target: "closed",
          actions: [emit({ type: "answer_header" }), assign({ closeReason: ({ event }) => event.description })],
        },
        PROTOCOL_ERROR: { target: "closed", actions: assign({ closeReason: ({ event }) => event.error.description }) },
        SHUTDOWN: { target: "closed", actions: assign({ closeReason: "shutdown" }) },
      },
    },
    saslExchange: {
      after: { handshake: { target: "closed", actions: assign({ closeReason: "SASL not completed in time" }) } },
      on: {
        AUTHENTICATE: {
          target: "authenticating",
          actions: emit(({ event }) => ({ type: "acquire_nats" as const, login: event.login })),
        },
        // No sasl_outcome to emit: rhea has written the `auth` outcome itself.
        SASL_REFUSED: {
          target: "saslRefused",
          actions: assign({ closeReason: ({ event }) => `SASL refused: ${event.reason}` }),
        },
        PROTOCOL_ERROR: { target: "closed", actions: assign({ closeReason: ({ event }) => event.error.description }) },
        SHUTDOWN: { target: "closed", actions: assign({ closeReason: "shutdown" }) },
      },
    },
    authenticating: {
      after: {
        handshake: { target: "closed", actions: assign({ closeReason: "NATS did not answer the login in time" }) },
      },
      on: {
        OPENED: { actions: assign({ opened: true, containerId: ({ event }) => event.containerId }) },
        NATS_READY: [
          { guard: "viaSasl", target: "awaitingOpen", actions: emit({ type: "sasl_outcome", ok: true }) },
          { guard: "opened", target: "serving" },
          { target: "awaitingOpen" },
        ],
        NATS_REFUSED: [
          {
            guard: "viaSasl",
            target: "saslRefused",
            actions: [
              emit({ type: "sasl_outcome", ok: false }),
              assign({ closeReason: ({ event }) => `NATS refused: ${event.reason}` }),
            ],
          },
          {
            // Without SASL the refusal is a close after rhea's open (part 2, 2.4.1).
            guard: "opened",
            target: "closing",
            actions: [
              emit(({ event }) => ({ type: "close_connection" as const, error: unauthorized(event.reason) })),
              assign({ closeReason: ({ event }) => `NATS refused: ${event.reason}` }),
            ],
          },
          { target: "loginRefused", actions: assign({ closeReason: ({ event }) => `NATS refused: ${event.reason}` }) },
        ],
        LIMIT_REFUSED: [
          {
            guard: "opened",
            target: "closing",
            actions: [
              emit(({ event }) => ({ type: "close_connection" as const, error: event.error })),
              assign({ closeReason: ({ event }) => event.error.description }),
            ],
          },
          {
            // The SASL exchange succeeds (NATS took the login); the close follows the open.
            guard: "viaSasl",
            target: "loginRefused",
            actions: [emit({ type: "sasl_outcome", ok: true }), "holdLimitError"],
          },
          { target: "loginRefused", actions: "holdLimitError" },
        ],
        PROTOCOL_ERROR: [
          {
            // Without SASL rhea has answered the open already: the client is owed a close with the error.
            guard: "opened",
            target: "closing",
            actions: [
              emit(({ event }) => ({ type: "close_connection" as const, error: event.error })),
              assign({ closeReason: ({ event }) => event.error.description }),
            ],
          },
          { target: "closed", actions: assign({ closeReason: ({ event }) => event.error.description }) },
        ],
        SHUTDOWN: { target: "closed", actions: assign({ closeReason: "shutdown" }) },
      },
    },
    saslRefused: {
      // The client got SASL's `auth` outcome and should hang up; one that does not is cut off.
      after: { closeGrace: { target: "closed" } },
    },
    loginRefused: {
      after: { handshake: { target: "closed" } },
      on: {
        OPENED: {
          target: "closing",
          actions: emit(({ context }) => ({
            type: "close_connection" as const,
            error: context.closeError ?? unauthorized(context.closeReason),
          })),
        },
        PROTOCOL_ERROR: { target: "closed" },
        SHUTDOWN: { target: "closed" },
      },
    },
    awaitingOpen: {
      after: { handshake: { target: "closed", actions: assign({ closeReason: "no open in time" }) } },
      on: {
        OPENED: { target: "serving", actions: assign({ opened: true, containerId: ({ event }) => event.containerId }) },
        PROTOCOL_ERROR: { target: "closed", actions: assign({ closeReason: ({ event }) => event.error.description }) },
        SHUTDOWN: { target: "closed", actions: assign({ closeReason: "shutdown" }) },
      },
    },
    // NATS going away is each link's affair (amqpLink.ts `nats`): they stop granting credit
    // and asking for messages; the connection goes on.
    serving: {
      entry: emit({ type: "serve" }),
      initial: "idle",
      states: {
        idle: {
          initial: "watching",
          states: {
            watching: {
              after: { idle: { target: "#amqpConnection.idleExpired" } },
              on: { ACTIVITY: { target: "watching", reenter: true } },
            },
          },
        },
      },
      on: {
        KICK: { target: "kicked" },
        SHUTDOWN: { target: "shuttingDown" },
        REMOTE_CLOSE: { target: "closing", actions: assign({ closeReason: "closed by the client" }) },
        PROTOCOL_ERROR: {
          target: "closing",
          actions: [
            emit(({ event }) => ({ type: "close_connection" as const, error: event.error })),
            assign({ closeReason: ({ event }) => event.error.description }),
          ],
        },
      },
    },
    idleExpired: {
      entry: [
        emit({
          type: "close_connection",
          error: { condition: "amqp:resource-limit-exceeded", description: "idle timeout expired" },
        }),
        assign({ closeReason: "idle timeout" }),
      ],
      always: { target: "closing" },
    },
    kicked: {
      entry: [
        emit({
          type: "close_connection",
          error: { condition: "amqp:connection:forced", description: "closed by an administrator" },
        }),
        assign({ closeReason: "kicked" }),
      ],
      always: { target: "closing" },
    },
    shuttingDown: {
      entry: [
        emit({
          type: "close_connection",
          error: { condition: "amqp:connection:forced", description: "the gateway is shutting down" },
        }),
        assign({ closeReason: "shutdown" }),
      ],
      always: { target: "closing" },
    },
    closing: {
      // rhea ends the socket once the client answers the close; one that never does is cut off.
      after: { closeGrace: { target: "closed" } },
    },
    closed: {
      type: "final",
      entry: emit({ type: "close" }),
    },
  },
});
