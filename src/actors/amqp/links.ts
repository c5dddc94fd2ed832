import { Effect, type Scope } from "effect";
import type { Receiver, Sender, Session } from "rhea";
import { amqpReceiverLinkMachine, amqpSenderLinkMachine, type LinkError } from "../../machines/amqpLink.js";
import type { ActorRegistry } from "../registry.js";
import type { LinkContext } from "./context.js";
import { linkActor } from "./linkActor.js";
import { ReceiverLink } from "./receiverLink.js";
import { holdAttach } from "./rhea.js";
import { SenderLink } from "./senderLink.js";

export type SpawnLink = (id: number, link: Effect.Effect<void, never, Scope.Scope>) => void;

/**
 * The links of one connection: each attach held until the client is served, counted
 * against the per-connection limits, started as an actor in the connection's scope, and
 * told when its session ends (rhea tells only the session).
 */
export class ConnectionLinks {
  private ctx: LinkContext | undefined;
  /** Attaches that came before the login completed. */
  private readonly waiting: Array<() => void> = [];
  private readonly live = new Map<number, { session: Session; edge: SenderLink | ReceiverLink }>();
  private readonly sending = new Set<SenderLink>();
  private receivers = 0;
  private nextId = 1;

  constructor(
    private readonly spawn: SpawnLink,
    private readonly registry: ActorRegistry,
  ) {}

  /** `role` is the client's: it sends on a link whose gateway end is an rhea Receiver. */
  attached(link: Sender | Receiver, role: "sender" | "receiver"): void {
    // Synchronously, before rhea answers the attach on the next tick.
    holdAttach(link);
    const start = () => (role === "sender" ? this.startSending(link as Receiver) : this.startReceiving(link as Sender));
    if (this.ctx) start();
    else this.waiting.push(start);
  }

  serve(ctx: LinkContext): void {
    this.ctx = ctx;
    for (const start of this.waiting.splice(0)) start();
  }

  sessionEnded(session: Session | undefined): void {
    for (const l of this.live.values()) if (l.session === session) l.edge.detachedByClient();
  }

  /** After rhea read a chunk: deliveries still arriving in frames must stay under the size limit. */
  checkIncomplete(): void {
    for (const s of this.sending) s.checkIncomplete();
  }

  private startSending(link: Receiver): void {
    const ctx = this.ctx!;
    const max = ctx.settings.maxSenderLinks;
    const edge = new SenderLink(link, ctx, this.sending.size >= max ? tooMany("sending", max) : undefined);
    this.sending.add(edge);
    this.run(link, amqpSenderLinkMachine, edge, () => this.sending.delete(edge));
  }

  private startReceiving(link: Sender): void {
    const ctx = this.ctx!;
    const max = ctx.settings.maxReceiverLinks;
    const edge = new ReceiverLink(link, ctx, this.receivers >= max ? tooMany("receiving", max) : undefined);
    this.receivers++;
    this.run(link, amqpReceiverLinkMachine, edge, () => this.receivers--);
  }

  private run(
    link: Sender | Receiver,
    machine: typeof amqpSenderLinkMachine | typeof amqpReceiverLinkMachine,
    edge: SenderLink | ReceiverLink,
    ended: () => void,
  ): void {
    const id = this.nextId++;
    this.live.set(id, { session: link.session, edge });
    const actor = linkActor(machine, edge as never, this.registry).pipe(
      Effect.ensuring(
        Effect.sync(() => {
          this.live.delete(id);
          ended();
        }),
      ),
    );
    this.spawn(id, actor);
  }
}

const tooMany = (what: string, max: number): LinkError => ({
  condition: "amqp:resource-limit-exceeded",
  description: `at most ${max} ${what} links per connection`,
});
