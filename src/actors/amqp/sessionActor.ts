import type { Session } from "rhea";
import type { Logger } from "../../log.js";
import { amqpSessionMachine } from "../../machines/amqpSession.js";
import { remoteChannelOf } from "../../vendor/rhea.js";
import type { MachineActor } from "../machineActor.js";
import { startChildMachine } from "../machineActor.js";
import { once } from "../once.js";
import type { ActorRegistry } from "../registry.js";

const END_GRACE_MS = 5_000;

/** What a session needs of each link attached on it. */
export interface SessionLink {
  /** The link's session ended: the link actor lets go of what it holds. */
  detachedByClient(): void;
}

/**
 * The actor of one rhea session: its machine (amqpSession.ts) counts the session's links
 * and decides when it ends; this edge carries the machine's commands out on rhea and tells
 * the session's links when they go with it.
 */
export class AmqpSessionActor {
  private readonly actor: MachineActor<typeof amqpSessionMachine>;
  private readonly stopActor: () => void;
  private readonly links = new Map<number, SessionLink>();
  /** Lets go of the links and the machine: from the machine's end or the connection's, whichever comes first. */
  private readonly release: () => void;

  constructor(
    private readonly session: Session,
    /** Links the session may hold at once (its handle-max + 1). */
    maxLinks: number,
    registry: ActorRegistry,
    private readonly log: Logger,
    /** Closes the whole connection (a framing error the session found). */
    private readonly closeConnection: (condition: string, description: string) => void,
    onReleased: () => void,
    /** `<connection actor id>/session`: the live page finds a client's machines by it. */
    idPrefix: string,
  ) {
    const channel = remoteChannelOf(session);
    const { actor, stop } = startChildMachine(amqpSessionMachine, {
      input: { channel, maxLinks, endGraceMs: END_GRACE_MS },
      registry,
      id: `${idPrefix}-${channel}`,
      on: {
        end: ({ error }) => {
          this.log.info({ channel, reason: error.description }, "AMQP session ended by the gateway");
          this.session.close(error);
        },
        close_connection: ({ error }) => this.closeConnection(error.condition, error.description),
        detach_links: () => {
          for (const l of this.links.values()) l.detachedByClient();
        },
        // Emitted as the machine reaches its final state: let it finish that step first.
        release: () => queueMicrotask(() => this.release()),
      },
    });
    this.actor = actor;
    this.stopActor = stop;
    this.release = once(() => {
      this.links.clear();
      this.stopActor();
      onReleased();
    });
  }

  /** False once the session is ending: an attach held until now is not started. */
  open(): boolean {
    const s = this.actor.getSnapshot();
    return s.status === "active" && s.matches("begun");
  }

  /** `handle`: the client's handle in its attach. */
  linkStarted(id: number, handle: number, link: SessionLink): void {
    this.links.set(id, link);
    this.send({ type: "LINK_ATTACHED", handle });
  }

  linkEnded(id: number): void {
    if (this.links.delete(id)) this.send({ type: "LINK_DETACHED" });
  }

  remoteEnded(): void {
    this.send({ type: "REMOTE_END" });
  }

  /** The connection is going (its scope ends every link actor). */
  connectionClosed(): void {
    this.send({ type: "CONNECTION_CLOSED" });
    this.release();
  }

  private send(e: Parameters<typeof this.actor.send>[0]): void {
    if (this.actor.getSnapshot().status === "active") this.actor.send(e);
  }
}
