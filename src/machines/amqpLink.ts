import { setup } from "xstate";

/**
 * The life of one AMQP link, named by what the *client* does on it (as the spec's
 * "Sender links (targets)" and "Receiver links (sources)" do):
 *
 * - amqpSenderLink: the client sends, the gateway publishes to NATS;
 * - amqpReceiverLink: the client receives from a NATS subscription or a JetStream consumer.
 *
 * rhea has already read the client's attach when the machine starts. The gateway's own
 * attach waits in `attaching` until the address is resolved (checked, subscribed,
 * its consumer found), so a refused link gets the spec's attach-with-null-terminus and
 * detach carrying the error (AMQP part 2, 2.6.3). Transfers, credit top-ups and
 * dispositions are the actor's plain functions while the link is `active`; the machine
 * holds only what changes what the link does.
 */
export interface LinkError {
  readonly condition: string;
  readonly description: string;
}

export type AmqpLinkEvent =
  | { type: "RESOLVED"; address: string | null }
  | { type: "REFUSED"; error: LinkError }
  /** The gateway ends the link (too large a message, credit ignored, consumer gone). */
  | { type: "FAULT"; error: LinkError }
  /** The client detached (or its session or connection ended). */
  | { type: "REMOTE_DETACH" }
  | { type: "NATS_DOWN" }
  | { type: "NATS_UP" }
  /** The client set drain on a flow: use the credit or give it back. */
  | { type: "DRAIN" }
  | { type: "DRAINED" };

export type AmqpLinkEmitted =
  /** Check the address (and subscribe, or find the consumer) before answering the attach. */
  | { type: "resolve" }
  | { type: "attach"; address: string | null }
  | { type: "refuse"; error: LinkError }
  | { type: "detach"; error?: LinkError }
  /** Open the link's credit (sender links) or ask NATS for messages (receiver links). */
  | { type: "flow" }
  /** Stop granting credit, or asking for messages, while NATS is away. */
  | { type: "hold" }
  | { type: "drain" }
  | { type: "release" };

export interface AmqpLinkContext {
  readonly detachGraceMs: number;
  address: string | null;
  error?: LinkError;
}

const linkSetup = setup({
  types: {
    context: {} as AmqpLinkContext,
    events: {} as AmqpLinkEvent,
    emitted: {} as AmqpLinkEmitted,
    input: {} as { detachGraceMs: number },
    tags: {} as "attached" | "natsUp" | "draining",
  },
  delays: { detachGrace: ({ context }) => context.detachGraceMs },
  guards: {
    // A fault while the address was resolved (a transfer without credit, a refused subscription).
    faultedWhileAttaching: ({ context }) => context.error !== undefined,
  },
});

const { assign, emit } = linkSetup;

// State configs shared by both machines see the whole event union.
const addressOf = (e: AmqpLinkEvent): string | null => (e.type === "RESOLVED" ? e.address : null);
const errorOf = (e: AmqpLinkEvent): LinkError | undefined =>
  e.type === "REFUSED" || e.type === "FAULT" ? e.error : undefined;

/** Both kinds: the gateway's attach waits here for the actor's verdict on the address. */
const attaching = linkSetup.createStateConfig({
  entry: emit({ type: "resolve" }),
  on: {
    RESOLVED: [
      // What went wrong meanwhile is the answer to the attach.
      { guard: "faultedWhileAttaching", target: "refused" },
      {
        target: "active",
        actions: [
          assign({ address: ({ event }) => addressOf(event) }),
          emit(({ event }) => ({ type: "attach" as const, address: addressOf(event) })),
        ],
      },
    ],
    REFUSED: { target: "refused", actions: assign({ error: ({ context, event }) => context.error ?? errorOf(event) }) },
    FAULT: { actions: assign({ error: ({ context, event }) => context.error ?? errorOf(event) }) },
  },
});

const refused = linkSetup.createStateConfig({
  entry: emit(({ context }) => ({ type: "refuse" as const, error: context.error! })),
  always: { target: "detached" },
});

const detaching = linkSetup.createStateConfig({
  entry: emit(({ context }) => ({ type: "detach" as const, ...(context.error ? { error: context.error } : {}) })),
  // The client answers our detach with its own; one that never does is let go.
  after: { detachGrace: { target: "detached" } },
});

const detached = linkSetup.createStateConfig({ type: "final", entry: emit({ type: "release" }) });

/** NATS up or down: while down, no credit is granted and nothing is pulled. */
const nats = linkSetup.createStateConfig({
  initial: "online",
  states: {
    // Credit is granted (sender links), NATS is asked for messages (receiver links), only here.
    online: { tags: ["natsUp"], entry: emit({ type: "flow" }), on: { NATS_DOWN: { target: "down" } } },
    down: { entry: emit({ type: "hold" }), on: { NATS_UP: { target: "online" } } },
  },
});

const fault = {
  target: "detaching" as const,
  actions: assign({ error: ({ event }: { event: AmqpLinkEvent }) => errorOf(event) }),
};
const context = ({ input }: { input: { detachGraceMs: number } }): AmqpLinkContext => ({
  detachGraceMs: input.detachGraceMs,
  address: null,
});

export const amqpSenderLinkMachine = linkSetup.createMachine({
  id: "amqpSenderLink",
  context,
  initial: "attaching",
  // A link whose client is gone has nothing left to say.
  on: { REMOTE_DETACH: { target: ".detached" } },
  states: {
    attaching,
    refused,
    // Transfers are taken only here; after a fault the link is detaching and takes none.
    active: { type: "parallel", tags: ["attached"], states: { nats }, on: { FAULT: fault } },
    detaching,
    detached,
  },
});

export const amqpReceiverLinkMachine = linkSetup.createMachine({
  id: "amqpReceiverLink",
  context,
  initial: "attaching",
  on: { REMOTE_DETACH: { target: ".detached" } },
  states: {
    attaching,
    refused,
    // Messages go to the client only here: nothing is delivered once the link is detaching.
    active: {
      type: "parallel",
      tags: ["attached"],
      states: {
        nats,
        credit: {
          initial: "flowing",
          states: {
            flowing: { on: { DRAIN: { target: "draining" } } },
            // AMQP part 2, 2.6.7: send what there is, then advance the delivery count over the rest.
            draining: { tags: ["draining"], entry: emit({ type: "drain" }), on: { DRAINED: { target: "flowing" } } },
          },
        },
      },
      on: { FAULT: fault },
    },
    detaching,
    detached,
  },
});
