/**
 * The xstate internals the gateway relies on, in one place (docs/decisions/vendor-patches.md).
 * xstate 5.33.3, pinned; test/vendor.test.ts fails when the source of `Actor` changes, so
 * an upgrade is a decision.
 */
import { Actor, type AnyActorLogic, type AnyActorRef } from "xstate";

/** The upstream code the functions below rely on (test/vendor.test.ts hashes its source). */
export const upstream: Readonly<Record<string, unknown>> = {
  // `eventListeners` (read by the actor scope's emit), `update`, `_complete`, `_error`, `_stop`, `stop`.
  "xstate Actor": Actor,
};

/**
 * Stands in for an actor's private `eventListeners` (a Map of Sets of bound handlers) when
 * its only listener is its owner's command handler: xstate's emit asks `get(type)` and
 * `get("*")` and iterates what it gets; `on` would `set`, and nothing here calls it. Saves a
 * Map, a Set and a bound function per actor (about 0.3 KiB; two actors per MQTT connection).
 */
class OneHandler {
  private handler: [(e: unknown) => void] | undefined;
  constructor(handler: (e: unknown) => void) {
    this.handler = [handler];
  }
  get(type: string): [(e: unknown) => void] | undefined {
    return type === "*" ? this.handler : undefined;
  }
  set(): never {
    throw new Error("a machine actor has one command handler (vendor/xstate.ts); `on` is not for it");
  }
  clear(): void {
    this.handler = undefined;
  }
}

/** Replaces the private `Actor.eventListeners` of a not yet started actor: everything it emits goes to `handler`. */
export function emitTo(actor: AnyActorRef, handler: (e: unknown) => void): void {
  (actor as unknown as { eventListeners: unknown }).eventListeners = new OneHandler(handler);
}

/**
 * Stops an actor that has a parent (a shared host's child): `Actor.stop()` is for root
 * actors; the private `Actor._stop` is what it calls, and what a parent calls for a child.
 */
export function stopChild(actor: AnyActorRef): void {
  (actor as unknown as { _stop(): void })._stop();
}

/**
 * Whether the actor runs under a parent (a shared host's child), read from the private
 * `Actor._parent`: xstate reports the error of a root actor that has no observer as
 * unhandled (a throw out of a timer), and a child's to its parent instead.
 */
export function hasParent(actor: AnyActorRef): boolean {
  return (actor as unknown as { _parent?: unknown })._parent !== undefined;
}

type Snapshot = { status: string; value?: unknown };

/**
 * An Actor whose private `Actor.update` (where xstate announces each new snapshot, with the
 * event that made it, to observers and inspectors alike) calls `seen` too. Watching through
 * `system.inspect` made xstate build and dispatch an inspection event for every event,
 * microstep, action and snapshot of every actor in the system.
 */
const ActorBase = Actor as unknown as new (
  logic: AnyActorLogic,
  options?: unknown,
) => {
  update(snapshot: Snapshot, event: { type: string }): void;
  _complete(): void;
  _error(error: unknown): void;
};

/**
 * Also tells `ended` of the end of the actor, through the private `Actor._complete` (a final
 * state, or stopped) and `Actor._error` (an action threw), where xstate tells its
 * observers: an owner that only waits for the end needs no observer (`subscribe` binds its
 * handlers and keeps an observer and a subscription per actor, about 0.25 KiB).
 */
export abstract class SnapshotHookedActor extends ActorBase {
  protected abstract seen(snapshot: Snapshot, event: { type: string }): void;
  protected abstract ended(error?: unknown): void;

  override update(snapshot: Snapshot, event: { type: string }): void {
    super.update(snapshot, event);
    this.seen(snapshot, event);
  }

  override _complete(): void {
    super._complete();
    this.ended();
  }

  override _error(error: unknown): void {
    this.ended(error);
    super._error(error);
  }
}

/** The same for an actor made elsewhere (`createActor`): its own `Actor.update` is wrapped. */
export function onSnapshots(actor: AnyActorRef, seen: (snapshot: Snapshot, event: { type: string }) => void): void {
  const a = actor as unknown as { update(snapshot: Snapshot, event: { type: string }): void };
  const update = a.update;
  a.update = function (snapshot, event) {
    update.call(this, snapshot, event);
    seen(snapshot, event);
  };
}
