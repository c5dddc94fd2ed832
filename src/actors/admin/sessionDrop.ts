import { Effect, type Scope } from "effect";
import type { Logger } from "../../log.js";
import { adminSessionDropMachine } from "../../machines/adminSessionDrop.js";
import type { AccountServices } from "../accountServices.js";
import { ActorTasks } from "../actorTasks.js";
import type { ClientRegistry } from "../clients.js";
import { awaitDone, startMachine } from "../machineActor.js";
import type { SessionStore } from "../mqtt/sessionStore.js";
import type { ActorRegistry } from "../registry.js";
import { deleteSession, readSession } from "./sessions.js";

export interface SessionDropDeps {
  readonly id: string;
  readonly services: AccountServices;
  readonly store: Pick<SessionStore, "remove">;
  readonly clients: ClientRegistry;
  readonly registry: ActorRegistry;
  readonly log: Logger;
  /** An admin request to another gateway, on the admin connection (its `kick`). */
  readonly adminRequest: (subject: string, body: object, timeoutMs: number) => Promise<Record<string, unknown>>;
  readonly timeoutMs: number;
}

export type SessionDropReply =
  | { dropped: true; client_id: string; account: string; kicked: string | null; consumers: number }
  | { dropped: false; reason: string };

/**
 * One `sessions.drop` as an actor: the machine orders the steps (machines/adminSessionDrop.ts);
 * this reads the record, lets the client go here or asks its gateway to, and deletes.
 */
export const sessionDropActor = (
  account: string,
  clientId: string,
  deps: SessionDropDeps,
  answer: (reply: SessionDropReply) => void,
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    // Each step's NATS work is a fiber of this actor: what is still out when it ends is interrupted.
    const tasks = yield* ActorTasks.scoped((e) =>
      actor.send({ type: "FAILED", reason: e instanceof Error ? e.message : String(e) }),
    );
    let unwatch: (() => void) | undefined;
    const actor = yield* startMachine(adminSessionDropMachine, {
      input: { timeoutMs: deps.timeoutMs },
      registry: deps.registry,
      on: {
        read: () =>
          tasks.run(
            () => readSession(deps.services, account, clientId),
            (found) =>
              actor.send(
                found
                  ? { type: "FOUND", owner: found.session.connected ? (found.session.owner ?? deps.id) : undefined }
                  : { type: "NOT_FOUND" },
              ),
          ),
        kick: ({ owner }) => {
          if (owner === deps.id) {
            unwatch = kickHere(deps.clients, account, clientId, () => actor.send({ type: "KICKED" }));
            return;
          }
          // Its gateway answers once the connection has left it; one that does not answer is
          // gone (the sweeper settles what it left): the record goes all the same.
          tasks.run(
            () =>
              deps
                .adminRequest(`$MQG.admin.server.${owner}.kick`, { client_id: clientId, account }, deps.timeoutMs - 500)
                .catch((e: unknown) => {
                  deps.log.info(
                    { owner, client_id: clientId, err: (e as Error).message },
                    "session drop: its gateway did not answer the kick",
                  );
                }),
            () => actor.send({ type: "KICKED" }),
          );
        },
        delete: () =>
          tasks.run(
            () => deleteSession(deps.services, deps.store, account, clientId),
            (consumers) => actor.send({ type: "DELETED", consumers }),
          ),
        dropped: ({ kicked, consumers }) =>
          answer({ dropped: true, client_id: clientId, account, kicked: kicked ?? null, consumers }),
        failed: ({ reason }) => answer({ dropped: false, reason }),
      },
    });
    yield* Effect.addFinalizer(() => Effect.sync(() => unwatch?.()));
    yield* awaitDone(actor);
  });

/** Kicks the client's MQTT connections here; `gone` once none is left. Returns the unwatch. */
function kickHere(clients: ClientRegistry, account: string, clientId: string, gone: () => void): () => void {
  const here = () => clients.byClient(account, clientId).filter((h) => h.protocol === "mqtt");
  const unwatch = clients.onChange((change) => {
    if (change === "removed" && here().length === 0) gone();
  });
  const connected = here();
  for (const h of connected) h.kick();
  if (here().length === 0) gone();
  return unwatch;
}
