import type { Actor } from "xstate";
import { mqttSessionMachine } from "../../machines/mqttSession.js";
import { startChildMachine } from "../machineActor.js";
import type { ActorRegistry } from "../registry.js";
import type { ClientLink } from "./link.js";
import type { ClientSession, SessionDeps } from "./session.js";
import type { SessionDirectory } from "./sessionDirectory.js";
import type { LoadedSession } from "./sessionStore.js";

export interface SessionActor {
  readonly actor: Actor<typeof mqttSessionMachine>;
  readonly stop: () => void;
  /** The connection's network side is over (mqttConnection `detach_session`). */
  detach(expirySec: number): void;
  /** Resolves once the session is saved, removed or refused (its machine is done). */
  readonly done: Promise<void>;
}

export interface SessionActorOptions {
  readonly link: ClientLink;
  readonly session: ClientSession;
  readonly deps: SessionDeps;
  readonly registry: ActorRegistry;
  readonly directory: SessionDirectory;
  readonly cleanStart: boolean;
  readonly expirySec: number;
  /** Tells the other gateways sharing the account that this client id connected here. */
  readonly announce: () => void;
  /** Asks the gateway that holds a client's session to let it go: false when it did not answer. */
  readonly remoteTakeover: (owner: string) => Promise<boolean>;
  /** What the connection machine hears: SESSION_READY / SESSION_REFUSED. */
  readonly onReady: (sessionPresent: boolean) => void;
  readonly onRefused: (reason: string) => void;
}

/**
 * Runs the mqttSession machine of one connection: the machine decides, this carries out
 * its commands against the session directory, the sessions bucket, the other gateways,
 * the consumers and the ClientSession, and tells the machine what came of each.
 */
export function startSessionActor(options: SessionActorOptions): SessionActor {
  const { link, session, deps, directory } = options;
  const { account, clientId } = link;
  const { store } = deps;
  let loaded: LoadedSession | undefined;
  let release: (() => void) | undefined;
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
        case "claim":
          options.announce();
          // Told at once when nothing waits: `actor` is not assigned yet while it starts.
          release = directory.claim(account, clientId, { claimed: () => queueMicrotask(() => actor.send({ type: "CLAIMED" })) });
          return;
        case "load":
          return void store.load(account, clientId).then(
            (found) => {
              loaded = found;
              const held = found?.session.connected === true ? found.session.owner : undefined;
              actor.send({
                type: "LOADED",
                found: {
                  exists: found !== undefined,
                  expired: found?.expired === true,
                  // Marked connected by this gateway's id: a connection here that ended (the claim
                  // waited for it) or a process of this id before a restart; either way not held.
                  heldBy: held && held !== deps.gatewayId ? held : undefined,
                },
              });
            },
            (err: Error) => actor.send({ type: "LOAD_FAILED", reason: err.message }),
          );
        case "ask_owner":
          return void options.remoteTakeover(e.owner).then(
            (alive) => actor.send({ type: alive ? "OWNER_RELEASED" : "OWNER_GONE" }),
            () => actor.send({ type: "OWNER_GONE" }),
          );
        case "discard":
          return settled(loaded ? session.discard(loaded) : Promise.resolve(), () => actor.send({ type: "DISCARDED" }));
        // Subscriptions reopen before CONNACK so nothing published after it is missed;
        // what they receive waits in the session until CONNACK is out.
        case "resume":
          return settled(session.resume(loaded!), () => actor.send({ type: "RESUMED" }));
        case "ready":
          if (!e.sessionPresent) session.startFresh();
          if (options.expirySec <= 0) return options.onReady(e.sessionPresent);
          // Marked held by this gateway before CONNACK: another gateway asks here first.
          return void session.takeRecord().then(() => options.onReady(e.sessionPresent));
        case "refuse":
          return options.onRefused(e.reason);
        case "stop_delivery":
          return session.stopDelivery();
        case "save_detached":
          return settled(session.saveDetached(e.expirySec), () => actor.send({ type: "SAVED" }));
        case "remove":
          return settled(session.removeStored(), () => actor.send({ type: "REMOVED" }));
      }
    },
  });
  const done = new Promise<void>((resolve) => {
    const end = () => {
      // Nothing this session asked to write goes out any more, and the next session of this
      // client id, here, may read the store now.
      session.stopWriting();
      release?.();
      resolve();
    };
    actor.subscribe({
      complete: end,
      error: (e) => {
        link.log.error({ err: String(e) }, "session machine failed");
        options.onRefused(String(e));
        end();
      },
    });
    if (actor.getSnapshot().status !== "active") end();
  });
  return {
    actor,
    stop,
    done,
    detach: (expirySec) => actor.send({ type: "DETACH", expirySec }),
  };
}
