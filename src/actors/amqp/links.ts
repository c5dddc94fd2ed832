import { Effect, type Scope } from "effect";
import type { Receiver, Sender, Session } from "rhea";
import type { Logger } from "../../log.js";
import { amqpReceiverLinkMachine, amqpSenderLinkMachine, type LinkError } from "../../machines/amqpLink.js";
import { advertiseHandleMax, holdAttach, remoteHandleOf } from "../../vendor/rhea.js";
import type { ActorRegistry } from "../registry.js";
import type { LinkContext } from "./context.js";
import { linkActor } from "./linkActor.js";
import { ReceiverLink } from "./receiverLink.js";
import { SenderLink } from "./senderLink.js";
import { AmqpSessionActor } from "./sessionActor.js";

export type SpawnLink = (id: number, link: Effect.Effect<void, never, Scope.Scope>) => void;

/**
 * The sessions and links of one connection: each session an actor (sessionActor.ts) that
 * knows its links; each attach held until the client is served, counted against the
 * per-connection limits, started as an actor in the connection's scope, and known to its
 * session from start to end (rhea tells only the session when it ends).
 */
export class ConnectionLinks {
  private ctx: LinkContext | undefined;
  /** Attaches that came before the login completed. */
  private readonly waiting: Array<() => void> = [];
  private readonly sessions = new Map<Session, AmqpSessionActor>();
  /** Sessions whose actor ended: a late attach on one is not started (nor the session again). */
  private readonly ended = new WeakSet<Session>();
  private readonly sending = new Set<SenderLink>();
  /** The client's receiving links (the gateway sends on them): counted for metrics, listed for admin. */
  private readonly receivers = new Set<Sender>();
  private nextId = 1;

  constructor(
    /** The connection is over (its machine ended or was stopped). */
    private readonly connectionEnded: () => boolean,
    private readonly spawn: SpawnLink,
    private readonly registry: ActorRegistry,
    private readonly log: Logger,
    /**
     * Links one session may hold at once, advertised as its handle-max + 1: as many as the
     * connection allows in both directions, so the per-connection limits refuse a link
     * politely first, and only a client using handles it was not offered loses the session.
     */
    private readonly maxLinksPerSession: number,
    private readonly closeConnection: (condition: string, description: string) => void,
    /** The connection's actor id: its sessions and links are named under it (`amqp-3/link-1`). */
    private readonly actorId: string,
  ) {}

  /** Receiving links attached now, for the metrics. */
  receiverCount(): number {
    return this.receivers.size;
  }

  /** Each receiving link's source address (a dynamic or unnamed source shows as ""). */
  receiverSources(): string[] {
    return [...this.receivers].map((l) => String((l.source as { address?: unknown } | undefined)?.address ?? ""));
  }

  /** The client's begin: rhea answers it on the next tick, with the session's handle-max. */
  begun(session: Session): void {
    advertiseHandleMax(session, this.maxLinksPerSession);
    this.sessionOf(session);
  }

  /** `role` is the client's: it sends on a link whose gateway end is an rhea Receiver. */
  attached(link: Sender | Receiver, role: "sender" | "receiver"): void {
    // Synchronously, before rhea answers the attach on the next tick.
    holdAttach(link);
    const start = () => {
      const session = this.sessionOf(link.session);
      // The session ended (or broke its handle-max) while this attach waited.
      if (!session?.open()) return;
      if (role === "sender") this.startSending(link as Receiver, session);
      else this.startReceiving(link as Sender, session);
    };
    if (this.ctx) start();
    else this.waiting.push(start);
  }

  serve(ctx: LinkContext): void {
    this.ctx = ctx;
    for (const start of this.waiting.splice(0)) start();
  }

  /** The client ended a session (rhea answers the end). */
  sessionEnded(session: Session | undefined): void {
    if (session) this.sessions.get(session)?.remoteEnded();
  }

  /** The connection is going: every session goes with it. */
  close(): void {
    for (const s of [...this.sessions.values()]) s.connectionClosed();
    this.sessions.clear();
  }

  private sessionOf(session: Session): AmqpSessionActor | undefined {
    if (this.connectionEnded() || this.ended.has(session)) return undefined;
    let actor = this.sessions.get(session);
    if (!actor) {
      actor = new AmqpSessionActor(
        session,
        this.maxLinksPerSession,
        this.registry,
        this.log,
        this.closeConnection,
        () => {
          this.sessions.delete(session);
          this.ended.add(session);
        },
        `${this.actorId}/session`,
      );
      this.sessions.set(session, actor);
    }
    return actor;
  }

  /** After rhea read a chunk: deliveries still arriving in frames must stay under the size limit. */
  checkIncomplete(): void {
    for (const s of this.sending) s.checkIncomplete();
  }

  private startSending(link: Receiver, session: AmqpSessionActor): void {
    const ctx = this.ctx!;
    const max = ctx.settings.maxSenderLinks;
    const edge = new SenderLink(link, ctx, this.sending.size >= max ? tooMany("sending", max) : undefined);
    this.sending.add(edge);
    this.run(link, session, amqpSenderLinkMachine, edge, () => this.sending.delete(edge));
  }

  private startReceiving(link: Sender, session: AmqpSessionActor): void {
    const ctx = this.ctx!;
    const max = ctx.settings.maxReceiverLinks;
    const edge = new ReceiverLink(link, ctx, this.receivers.size >= max ? tooMany("receiving", max) : undefined);
    this.receivers.add(link);
    this.run(link, session, amqpReceiverLinkMachine, edge, () => this.receivers.delete(link));
  }

  private run(
    link: Sender | Receiver,
    session: AmqpSessionActor,
    machine: typeof amqpSenderLinkMachine | typeof amqpReceiverLinkMachine,
    edge: SenderLink | ReceiverLink,
    ended: () => void,
  ): void {
    const id = this.nextId++;
    const actor = linkActor(machine, edge as never, this.registry, `${this.actorId}/link-${id}`).pipe(
      Effect.ensuring(
        Effect.sync(() => {
          session.linkEnded(id);
          ended();
        }),
      ),
    );
    this.spawn(id, actor);
    // After the spawn: a session that ends on this attach (handle-max) tells this link too.
    session.linkStarted(id, remoteHandleOf(link), edge);
  }
}

const tooMany = (what: string, max: number): LinkError => ({
  condition: "amqp:resource-limit-exceeded",
  description: `at most ${max} ${what} links per connection`,
});
