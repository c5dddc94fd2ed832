import { assign, emit, setup } from "xstate";

/**
 * The admin account's connection (admin-subjects.md). It serves the admin scopes while
 * `serving`; whatever NATS does to it (refuses the user, drops the link, closes it) is a
 * state with a warning, never a reason to stop serving MQTT and AMQP clients.
 */
export type AdminConnectionEvent =
  | { type: "CONNECTED"; account: string | null; server: string }
  | { type: "CONNECT_FAILED"; reason: string; auth: boolean }
  | { type: "SUBSCRIBE_REFUSED"; subject: string; reason: string }
  | { type: "DISCONNECTED" }
  | { type: "RECONNECTED"; server: string }
  | { type: "CLOSED"; reason: string };

export type AdminConnectionEmitted =
  | { type: "connect" }
  | { type: "subscribe" }
  | { type: "serving"; account: string | null; server: string }
  | { type: "warn"; message: string; reason: string; retryInMs?: number };

export interface AdminConnectionContext {
  /** The admin account as NATS names it; null until known. */
  account: string | null;
  server: string;
  /** Consecutive failed connects, for the backoff. */
  failures: number;
  reason: string;
  refusedSubjects: string[];
}

// 1 s, 2 s, 4 s ... capped at 30 s: an admin user NATS refuses is retried (the operator may
// fix the server config or rotate the secret file) without flooding the server's log.
const backoff = (failures: number) => Math.min(30_000, 1_000 * 2 ** Math.max(0, Math.min(failures - 1, 5)));

export const adminConnectionMachine = setup({
  types: {
    context: {} as AdminConnectionContext,
    events: {} as AdminConnectionEvent,
    emitted: {} as AdminConnectionEmitted,
  },
  delays: {
    retry: ({ context }) => backoff(context.failures),
  },
  guards: {
    authRefused: ({ event }) => event.type === "CONNECT_FAILED" && event.auth,
  },
}).createMachine({
  id: "adminConnection",
  context: { account: null, server: "", failures: 0, reason: "", refusedSubjects: [] },
  initial: "connecting",
  states: {
    connecting: {
      entry: emit({ type: "connect" }),
      on: {
        CONNECTED: {
          target: "serving",
          actions: [
            assign({
              account: ({ event }) => event.account,
              server: ({ event }) => event.server,
              failures: 0,
              refusedSubjects: [],
            }),
            emit({ type: "subscribe" }),
          ],
        },
        CONNECT_FAILED: [
          {
            guard: "authRefused",
            target: "refused",
            actions: assign({ reason: ({ event }) => event.reason, failures: ({ context }) => context.failures + 1 }),
          },
          {
            target: "down.retrying",
            actions: assign({ reason: ({ event }) => event.reason, failures: ({ context }) => context.failures + 1 }),
          },
        ],
      },
    },
    serving: {
      entry: emit(({ context }) => ({ type: "serving" as const, account: context.account, server: context.server })),
      on: {
        SUBSCRIBE_REFUSED: {
          actions: [
            assign({ refusedSubjects: ({ context, event }) => [...context.refusedSubjects, event.subject] }),
            emit(({ event }) => ({
              type: "warn" as const,
              message: `NATS refused the admin subscription ${event.subject}: requests there are not served`,
              reason: event.reason,
            })),
          ],
        },
        DISCONNECTED: { target: "down.reconnecting" },
        CLOSED: {
          target: "down.retrying",
          actions: assign({ reason: ({ event }) => event.reason, failures: ({ context }) => context.failures + 1 }),
        },
      },
    },
    down: {
      initial: "reconnecting",
      states: {
        // The client library reconnects by itself and keeps the subscriptions.
        reconnecting: {
          entry: emit({
            type: "warn",
            message: "admin connection lost: admin requests are not served until it reconnects",
            reason: "disconnected",
          }),
          on: {
            RECONNECTED: {
              target: "#adminConnection.serving",
              actions: assign({ server: ({ event }) => event.server }),
            },
            CLOSED: {
              target: "retrying",
              actions: assign({ reason: ({ event }) => event.reason, failures: ({ context }) => context.failures + 1 }),
            },
          },
        },
        // The connection is gone for good: a new one after the backoff.
        retrying: {
          entry: emit(({ context }) => ({
            type: "warn" as const,
            message: "admin connection unavailable: admin requests are not served",
            reason: context.reason,
            retryInMs: backoff(context.failures),
          })),
          after: { retry: { target: "#adminConnection.connecting" } },
        },
      },
    },
    refused: {
      entry: emit(({ context }) => ({
        type: "warn" as const,
        message: "NATS refused the admin user: admin requests are not served; MQTT and AMQP clients are",
        reason: context.reason,
        retryInMs: backoff(context.failures),
      })),
      after: { retry: { target: "connecting" } },
    },
  },
});
