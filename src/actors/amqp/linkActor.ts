import { Effect, type Scope } from "effect";
import type { Logger } from "../../log.js";
import type { amqpReceiverLinkMachine, amqpSenderLinkMachine } from "../../machines/amqpLink.js";
import type { MachineActor } from "../machineActor.js";
import { awaitDone, startMachine } from "../machineActor.js";
import type { ActorRegistry } from "../registry.js";
import { guarded } from "./guarded.js";

type LinkMachine = typeof amqpSenderLinkMachine | typeof amqpReceiverLinkMachine;

/** The edge of one link: carries out its machine's commands and feeds it rhea's events. */
export interface LinkEdge<M extends LinkMachine> {
  commands(): NonNullable<Parameters<typeof startMachine<M>>[1]["on"]>;
  start(actor: MachineActor<M>): void;
  /** Releases what the link holds; runs however the link ends, and more than once is fine. */
  cleanup(): void;
  /** The client detached the link, or ended its session (rhea tells the session, not its links). */
  detachedByClient(): void;
  /** A command failed: detach with amqp:internal-error. */
  fail(e: unknown): void;
}

/** One link as an actor in its connection's scope: closing the connection ends it too. */
export const linkActor = <M extends LinkMachine>(
  machine: M,
  edge: LinkEdge<M>,
  registry: ActorRegistry,
  id?: string,
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    yield* Effect.addFinalizer(() => Effect.sync(() => edge.cleanup()));
    const actor = yield* startMachine(machine, {
      input: { detachGraceMs: 5_000 },
      registry,
      id,
      on: guarded(edge.commands() as Record<string, (e: never) => void>, edge),
    } as Parameters<typeof startMachine<M>>[1]);
    edge.start(actor);
    yield* awaitDone(actor);
  });

/** A command failed: the link is refused (still attaching) or detached with amqp:internal-error. */
export function failLink<M extends LinkMachine>(actor: MachineActor<M> | undefined, log: Logger, e: unknown): void {
  log.error({ err: e instanceof Error ? e.stack : String(e) }, "AMQP link failed");
  if (!actor) return;
  const error = { condition: "amqp:internal-error", description: "the gateway failed on this link" };
  const attaching = (actor.getSnapshot() as { matches(s: string): boolean }).matches("attaching");
  sendIfActive(actor, (attaching ? { type: "REFUSED", error } : { type: "FAULT", error }) as never);
}

/**
 * The client detached, or its session ended. Dispositions that came in the same read
 * are dispatched by rhea on the next tick: they are heard before the link lets go.
 */
export function detachedByClient<M extends LinkMachine>(actor: () => MachineActor<M> | undefined): void {
  setImmediate(() => {
    const a = actor();
    if (a) sendIfActive(a, { type: "REMOTE_DETACH" } as never);
  });
}

/** Sends to a machine that may have stopped meanwhile (async work finishing late). */
export function sendIfActive<M extends LinkMachine>(
  actor: MachineActor<M>,
  event: Parameters<MachineActor<M>["send"]>[0],
): void {
  if ((actor.getSnapshot() as { status: string }).status === "active") actor.send(event as never);
}
