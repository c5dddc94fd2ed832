import type { EmittedFrom } from "xstate";
import { mqttSessionMachine } from "../../machines/mqttSession.js";
import { type CommandTaker, type EndListener, type MachineActor, startOwnedMachine } from "../machineActor.js";
import type { ActorRegistry } from "../registry.js";
import type { SessionDeps } from "./deps.js";
import type { ClientLink } from "./link.js";
import { ParkedHold } from "./parkedHold.js";
import type { ClientSession } from "./session.js";
import type { Claim, Claimant, SessionDirectory } from "./sessionDirectory.js";
import { holderElsewhere } from "./sessionHolder.js";
import { type LoadedSession, SessionStoreUnread } from "./sessionStore.js";

/** What the session tells its connection, and asks of the gateway on its behalf (the connection implements it). */
export interface SessionOwner {
  /** Tells the other gateways sharing the account that this client id connected here. */
  announceSession(): void;
  /** Asks the gateway that holds a client's session to let it go: false when it did not answer. */
  takeOverRemote(owner: string): Promise<boolean>;
  /** What the connection machine hears: SESSION_READY / SESSION_REFUSED. */
  sessionReady(sessionPresent: boolean): void;
  sessionRefused(reason: string): void;
}

export interface SessionActorOptions {
  readonly link: ClientLink;
  readonly session: ClientSession;
  readonly deps: SessionDeps;
  readonly registry: ActorRegistry;
  /** `<connection actor id>/session`: the live page finds a client's two machines by it. */
  readonly id: string;
  readonly directory: SessionDirectory;
  readonly cleanStart: boolean;
  readonly expirySec: number;
  readonly owner: SessionOwner;
}

/**
 * Runs the mqttSession machine of one connection: the machine decides, this carries out
 * its commands against the session directory, the sessions bucket, the other gateways,
 * the consumers and the ClientSession, and tells the machine what came of each.
 * A class, not a closure per command and callback: one lives per connection, and its
 * closures were about a tenth of an idle connection's heap (docs/performance.md).
 */
export class SessionActor implements Claimant, CommandTaker<EmittedFrom<typeof mqttSessionMachine>>, EndListener {
  readonly actor: MachineActor<typeof mqttSessionMachine>;
  private loaded: LoadedSession | undefined;
  private claim: Claim | undefined;
  private whenDone: Promise<void> | undefined;
  private resolveDone: (() => void) | undefined;
  private readonly link: ClientLink;
  private readonly session: ClientSession;
  private readonly deps: SessionDeps;
  private readonly directory: SessionDirectory;
  private readonly owner: SessionOwner;
  private readonly expirySec: number;
  /** A resume's hold of the record parked here, made when there is one. */
  private hold: ParkedHold | undefined;

  constructor(o: SessionActorOptions) {
    ({
      link: this.link,
      session: this.session,
      deps: this.deps,
      directory: this.directory,
      owner: this.owner,
      expirySec: this.expirySec,
    } = o);
    const { account, clientId } = o.link;
    this.actor = startOwnedMachine(mqttSessionMachine, {
      input: {
        cleanStart: o.cleanStart,
        expirySec: o.expirySec,
        // A clean start only needs to know of an old session to clear it: none is known (docs/decisions/mqtt-sessions.md).
        nothingStored: o.cleanStart && o.deps.store.mayHold?.(account, clientId) === false,
        // Its claim, made in the machine's first step, is then granted at once (sessionDirectory.ts).
        claimedAtStart: !o.directory.holds(account, clientId),
      },
      registry: o.registry,
      id: o.id,
      // This object takes the machine's commands (`command`) and hears its end (`ended`).
      commands: this,
    });
    this.actor.listenEnd(this);
  }

  /** Ends the machine and takes it out of the registry (the connection's cleanup). */
  stop(): void {
    this.actor.retire();
  }

  /** The machine ended (EndListener): done or stopped, or failed with `error`. */
  ended(error?: unknown): void {
    if (error === undefined) this.end();
    else this.failed(error);
  }

  /** Resolves once the session is saved, removed or refused (its machine is done). Made when first asked: most connections are only asked at their close. */
  get done(): Promise<void> {
    this.whenDone ??=
      this.actor.getSnapshot().status === "active"
        ? new Promise<void>((resolve) => {
            this.resolveDone = resolve;
          })
        : Promise.resolve();
    return this.whenDone;
  }

  /**
   * The connection's network side is over (mqttConnection `detach_session`, or its cleanup).
   * A session already detached, or over, is not sent another: a step for nothing at every drop.
   */
  detach(expirySec: number): void {
    const state = this.actor.getSnapshot();
    if (state.status === "active" && !state.hasTag("detached")) this.actor.send({ type: "DETACH", expirySec });
  }

  /** The directory's answer to the claim: no earlier session of the client id is left here (Claimant). */
  claimed(): void {
    // Told at once when nothing waits: `actor` is not assigned yet while it starts. A machine
    // that knew so at its start went on in its first step, and hears nothing more of it.
    queueMicrotask(() => {
      if (this.actor.getSnapshot().hasTag("claiming")) this.actor.send({ type: "CLAIMED" });
    });
  }

  /**
   * Each command of the machine (CommandTaker). Those of its first step (claim, then load or
   * ready when the claim was granted at start) come while it starts, before `actor` is
   * assigned: what they need comes with them, or is asked of `actor` only later.
   */
  command(e: EmittedFrom<typeof mqttSessionMachine>): void {
    const { link, session, deps, owner } = this;
    const { account, clientId } = link;
    switch (e.type) {
      case "claim":
        owner.announceSession();
        this.claim = this.directory.claim(account, clientId, this);
        return;
      case "load":
        // Parked here by the connection that ended here last: held again in one write, else read.
        // A clean start reads what it clears.
        return void this.holdParked(e.resume)
          .then(
            (held) => held ?? deps.store.load(account, clientId).then((found) => this.hold?.recognise(found) ?? found),
          )
          .then(
            (found) => this.found(found),
            (err: Error) =>
              this.actor.send({
                type: "LOAD_FAILED",
                reason: err.message,
                waitable: err instanceof SessionStoreUnread && err.answersLater,
              }),
          );
      case "ask_owner":
        return void owner.takeOverRemote(e.owner).then(
          (alive) => this.actor.send({ type: alive ? "OWNER_RELEASED" : "OWNER_GONE" }),
          () => this.actor.send({ type: "OWNER_GONE" }),
        );
      case "discard": {
        const { loaded } = this;
        return this.settled(loaded ? session.discard(loaded) : Promise.resolve(), "DISCARDED");
      }
      // Subscriptions reopen before CONNACK so nothing published after it is missed;
      // what they receive waits in the session until CONNACK is out.
      case "resume":
        return this.settled(session.resume(this.loaded!), "RESUMED");
      case "ready":
        if (!e.sessionPresent) session.startFresh();
        // A session resumed with expiry 0 is in the store until this connection ends it: held here meanwhile.
        if (this.expirySec <= 0 && !e.sessionPresent) return owner.sessionReady(false);
        // Marked held by this gateway before CONNACK: another gateway asks here first.
        return void session.takeRecord(this.hold?.held).then(() => owner.sessionReady(e.sessionPresent));
      case "refuse":
        return owner.sessionRefused(e.reason);
      case "stop_delivery":
        return session.stopDelivery();
      case "save_detached":
        return this.settled(session.saveDetached(e.expirySec), "SAVED");
      case "remove":
        return this.settled(session.removeStored(), "REMOVED");
    }
  }

  /** Holds the record parked here for the client id (parkedHold.ts); undefined: nothing parked, not written, or a clean start. */
  private holdParked(resume: boolean): Promise<LoadedSession | undefined> {
    const { parked, store, gatewayId } = this.deps;
    const { account, clientId } = this.link;
    if (!resume || !parked?.recordOf(account, clientId)) return Promise.resolve(undefined);
    this.hold ??= new ParkedHold({ parked, store, gatewayId }, account, clientId, this.expirySec);
    return this.hold.hold();
  }

  private found(found: LoadedSession | undefined): void {
    this.loaded = found;
    this.actor.send({
      type: "LOADED",
      found: {
        exists: found !== undefined,
        expired: found?.expired === true,
        // Marked by this gateway's id: a connection here that ended (the claim waited for
        // it) or a process of this id before a restart; either way not held.
        heldBy: holderElsewhere(found?.session, this.deps.gatewayId, Date.now()),
      },
    });
  }

  /** Store calls report failures and move on: the machine bounds how long each step may take. */
  private settled(p: Promise<unknown>, then: "DISCARDED" | "RESUMED" | "SAVED" | "REMOVED"): void {
    const tell = () => this.actor.send({ type: then });
    void p.then(tell, (e: Error) => {
      this.link.log.warn({ err: e.message }, "session store");
      tell();
    });
  }

  private failed(e: unknown): void {
    this.link.log.error({ err: String(e) }, "session machine failed");
    this.owner.sessionRefused(String(e));
    this.end();
  }

  private end(): void {
    // Nothing this session asked to write goes out any more, and the next session of this
    // client id, here, may read the store now.
    this.session.stopWriting();
    this.claim?.release();
    this.resolveDone?.();
  }
}
