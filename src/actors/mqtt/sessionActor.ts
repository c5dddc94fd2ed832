import type { Actor } from "xstate";
import { mqttSessionMachine } from "../../machines/mqttSession.js";
import { startChildMachine } from "../machineActor.js";
import type { ActorRegistry } from "../registry.js";
import type { ClientLink } from "./link.js";
import type { ClientSession, SessionDeps } from "./session.js";
import type { StoredSession } from "./sessionStore.js";
import { StoredDelivery } from "./storedDelivery.js";

export interface SessionActor {
  readonly actor: Actor<typeof mqttSessionMachine>;
  readonly stop: () => void;
  /** Resolves with "session present" once the session is ready; rejects when it is refused. */
  readonly ready: Promise<boolean>;
}

/**
 * Runs the mqttSession machine of one connection: the machine decides, this carries out
 * its commands against the sessions bucket, the consumers and the ClientSession.
 */
export function startSessionActor(options: {
  readonly link: ClientLink;
  readonly session: ClientSession;
  readonly deps: SessionDeps;
  readonly registry: ActorRegistry;
  readonly cleanStart: boolean;
  readonly expirySec: number;
  readonly remoteTakeover: (account: string, clientId: string, owner: string) => Promise<boolean>;
}): SessionActor {
  const { link, session, deps } = options;
  const { account, clientId } = link;
  const { store } = deps;
  let stored: StoredSession | undefined;
  // The last holder is dead: its unacknowledged stored deliveries are reset (storedDelivery.ts).
  let ownerGone = false;
  let resolveReady!: (present: boolean) => void;
  let rejectReady!: (e: Error) => void;
  const ready = new Promise<boolean>((resolve, reject) => {
    resolveReady = resolve;
    rejectReady = reject;
  });
  // Store calls report failures and move on: the machine bounds how long each step may take.
  const settled = <T>(p: Promise<T>, then: () => void) =>
    void p.then(then, (e: Error) => {
      link.log.warn({ err: e.message }, "session store");
      then();
    });
  const { actor, stop } = startChildMachine(mqttSessionMachine, {
    input: {
      cleanStart: options.cleanStart,
      expirySec: options.expirySec,
      // A clean start only needs to know of an old session to clear it: none is known (docs/decisions/mqtt-sessions.md).
      nothingStored: options.cleanStart && store.mayHold?.(account, clientId) === false,
    },
    registry: options.registry,
    shared: true,
    // One dispatcher for the machine's commands (a closure per command per session adds up).
    onEmit: (e) => {
      switch (e.type) {
        case "load":
          return void store.load(account, clientId).then(
            (found) => {
              stored = found;
              // Marked connected by this gateway's id: held by a process before a restart (or by
              // a connection here that this one is taking over, which hands its messages back anyway).
              ownerGone = found?.connected === true && found.owner === deps.gatewayId;
              const heldBy = found?.connected && found.owner && found.owner !== deps.gatewayId ? found.owner : undefined;
              actor.send({
                type: "LOADED",
                found: { exists: found !== undefined, expired: found?.expiresAt === 0, heldBy },
              });
            },
            (err: Error) => actor.send({ type: "LOAD_FAILED", reason: err.message }),
          );
        case "ask_owner":
          return settled(
            options.remoteTakeover(account, clientId, e.owner).then((alive) => void (ownerGone = !alive)),
            () => actor.send({ type: "OWNER_RELEASED" }),
          );
        case "discard":
          return settled(
            Promise.all(
              (stored?.subscriptions ?? [])
                .filter((s) => s.stream)
                .map((s) =>
                  StoredDelivery.remove(
                    deps.services,
                    account,
                    s.stream!,
                    StoredDelivery.consumerName(account, clientId, s.subscription.topic),
                  ),
                ),
            ).then(() => store.remove(account, clientId)),
            () => actor.send({ type: "DISCARDED" }),
          );
        // Subscriptions reopen before CONNACK so nothing published after it is missed;
        // what they receive waits in the session until CONNACK is out.
        case "resume":
          return settled(session.resume(stored!, ownerGone), () => actor.send({ type: "RESUMED" }));
        case "ready":
          return void session.save().then(() => resolveReady(e.sessionPresent));
        case "refuse":
          return rejectReady(new Error(e.reason));
        case "stop_delivery":
          return session.stopDelivery();
        case "save_detached":
          return settled(session.save(false), () => actor.send({ type: "SAVED" }));
        case "remove":
          return settled(session.removeConsumers(), () => actor.send({ type: "REMOVED" }));
      }
    },
  });
  // A machine error no longer reaches the process (a child's errors go to its host): the
  // connection waiting for the session hears it as a refusal.
  actor.subscribe({ error: (e) => rejectReady(e instanceof Error ? e : new Error(String(e))) });
  return { actor, stop, ready };
}
