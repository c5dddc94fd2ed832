import { assign, emit, setup } from "xstate";

/**
 * One AMQP 1.0 session (part 2, 2.5): a channel of a connection and the links attached on
 * it. rhea answers the client's begin and end; this machine owns what the session *is*:
 * how many links it holds against its handle-max, when it ends (the client ended it, it
 * broke its handle-max, its connection is going) and that its links are told, so each
 * link actor lets go of its NATS subscription or consumer.
 *
 * The session answers to the connection (amqpConnection.ts); its links (amqpLink.ts) are
 * counted here from the moment their actor starts until it ends.
 */
export interface SessionError {
  readonly condition: string;
  readonly description: string;
}

export type AmqpSessionEvent =
  /** A link actor of this session started (the client's attach, held until the client is served). */
  | { type: "LINK_ATTACHED"; handle: number }
  /** A link actor of this session ended, however its link went. */
  | { type: "LINK_DETACHED" }
  /** The client's end arrived (rhea answers it). */
  | { type: "REMOTE_END" }
  /** The connection is closing or gone: its sessions go with it, without a word. */
  | { type: "CONNECTION_CLOSED" };

export type AmqpSessionEmitted =
  /** The gateway ends the session with this error (its own end frame). */
  | { type: "end"; error: SessionError }
  /** The client broke the connection's framing: close it with this error. */
  | { type: "close_connection"; error: SessionError }
  /** Every link of the session is gone with it (part 2, 2.5.4): each link actor lets go. */
  | { type: "detach_links" }
  /** The session is over: forget it. */
  | { type: "release" };

export interface AmqpSessionInput {
  /** The client's channel, for logs and the statecharts page. */
  readonly channel: number;
  /** Links the session may hold at once: its handle-max + 1, as advertised in the gateway's begin. */
  readonly maxLinks: number;
  /** How long an end the gateway sent waits for the client's. */
  readonly endGraceMs: number;
}

export interface AmqpSessionContext extends AmqpSessionInput {
  links: number;
  /** The client's end arrived. */
  remoteEnded: boolean;
  error?: SessionError;
}

const tooManyLinks = (max: number): SessionError => ({
  condition: "amqp:resource-limit-exceeded",
  description: `at most ${max} links on one session (handle-max ${max - 1})`,
});

export const amqpSessionMachine = setup({
  types: {
    context: {} as AmqpSessionContext,
    events: {} as AmqpSessionEvent,
    emitted: {} as AmqpSessionEmitted,
    input: {} as AmqpSessionInput,
  },
  delays: { endGrace: ({ context }) => context.endGraceMs },
  guards: {
    // Part 2, 2.7.2: a handle above handle-max is a framing error of the whole connection.
    beyondHandleMax: ({ context, event }) => event.type === "LINK_ATTACHED" && event.handle > context.maxLinks - 1,
    // Handles run 0..handle-max: with that many links attached, a new one reuses a handle in use.
    full: ({ context }) => context.links >= context.maxLinks,
    settled: ({ context }) => context.remoteEnded && context.links === 0,
  },
  actions: {
    countAttach: assign({ links: ({ context }) => context.links + 1 }),
    countDetach: assign({ links: ({ context }) => Math.max(0, context.links - 1) }),
  },
}).createMachine({
  id: "amqpSession",
  context: ({ input }) => ({ ...input, links: 0, remoteEnded: false }),
  initial: "begun",
  on: {
    CONNECTION_CLOSED: { target: ".ended" },
  },
  states: {
    begun: {
      on: {
        LINK_ATTACHED: [
          {
            guard: "beyondHandleMax",
            target: "ending",
            actions: [
              "countAttach",
              emit(({ context, event }) => ({
                type: "close_connection" as const,
                error: {
                  condition: "amqp:connection:framing-error",
                  description: `attach on handle ${event.handle}, above the session's handle-max ${context.maxLinks - 1}`,
                },
              })),
            ],
          },
          {
            guard: "full",
            target: "ending",
            actions: [
              "countAttach",
              assign({ error: ({ context }) => tooManyLinks(context.maxLinks) }),
              emit(({ context }) => ({ type: "end" as const, error: tooManyLinks(context.maxLinks) })),
              emit({ type: "detach_links" }),
            ],
          },
          { actions: "countAttach" },
        ],
        LINK_DETACHED: { actions: "countDetach" },
        REMOTE_END: {
          target: "ending",
          actions: [assign({ remoteEnded: true }), emit({ type: "detach_links" })],
        },
      },
    },
    ending: {
      // Over once the client has ended its side and every link actor has let go.
      always: { guard: "settled", target: "ended" },
      // A client that never answers the gateway's end, or a link that never lets go, is not waited for.
      after: { endGrace: { target: "ended" } },
      on: {
        // An attach that crossed the end: it goes too.
        LINK_ATTACHED: { actions: ["countAttach", emit({ type: "detach_links" })] },
        LINK_DETACHED: { actions: "countDetach" },
        REMOTE_END: { actions: assign({ remoteEnded: true }) },
      },
    },
    ended: {
      type: "final",
      entry: emit({ type: "release" }),
    },
  },
});
