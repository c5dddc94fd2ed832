import type { AnyStateMachine, EventObject } from "xstate";
import { amqpReceiverLinkMachine } from "../../machines/amqpLink.js";
import { jetStreamPullMachine } from "../../machines/jetStreamPull.js";
import { Broken } from "../model.js";
import {
  type Effect,
  ENDED,
  post,
  postOnce,
  type SystemModel,
  type SystemView,
  send,
  start,
  systemInvariant,
  type WorldEvent,
  world,
} from "../system.js";

/**
 * An AMQP link the client receives on from a JetStream consumer (L, amqpReceiverLink) and the
 * pull engine that reads the consumer for it (P, jetStreamPull), wired as receiverLink.ts,
 * jsFeed.ts and client/jetStreamPull.ts wire them:
 *
 * - L's `resolve` finds the consumer and starts P, then L hears RESOLVED (or, when the link
 *   ended meanwhile, P is stopped at once);
 * - L's `flow`, P's `ask`, new credit, a message offered: the link pumps (a microtask): it sends
 *   what it holds while `attached`, as far as the client's credit goes, then, while `natsUp` and
 *   not `draining`, wants the credit its queue does not cover; P pulls that much while `asking`
 *   (or is resumed when holding);
 * - L's `hold` holds P; L's `drain` pumps, drains P for the credit left (a no_wait pull) and,
 *   once P says `drained`, pumps, completes the drain (credit gone) and tells L DRAINED;
 * - P's `gone` faults L; L's `release` stops P and hands back everything held (NAK).
 *
 * The stream has messages whenever a pull is open; each pull may bring one, expire, be cut
 * short at once, get 503 or 409 (deleted), in any order with everything else.
 */
interface Pull {
  readonly n: number;
  readonly noWait: boolean;
}

export interface StreamLinkWorld {
  /** The client's credit, the link's queue, deliveries the client has not settled, and what the feed holds (not yet acked or handed back). */
  readonly credit: number;
  readonly queue: number;
  readonly unsettled: number;
  readonly held: number;
  readonly pulls: readonly Pull[];
  /** rhea's is_open(): the gateway attached and neither end has detached. */
  readonly open: boolean;
  /** A drain waits for P's `drained`. */
  readonly draining: boolean;
  /** CONSUMER.INFO is on its way (after a 503). */
  readonly checking: boolean;
}

const initialWorld: StreamLinkWorld = {
  credit: 0,
  queue: 0,
  unsettled: 0,
  held: 0,
  pulls: [],
  open: false,
  draining: false,
  checking: false,
};
const PREFETCH = 2;

export interface StreamLinkOptions {
  readonly link?: AnyStateMachine;
  readonly pull?: AnyStateMachine;
  /** The link's release leaves the engine running (broken on purpose). */
  readonly releaseForgetsFeed?: boolean;
  /** The pump wants credit whatever the link's state (broken on purpose: the booleans before the tags). */
  readonly pumpIgnoresNats?: boolean;
  /** The pump sends whatever state the link is in and whether or not the client is still there (broken on purpose). */
  readonly pumpIgnoresLink?: boolean;
  /** The pump sends all it holds, whatever credit the client has left (broken on purpose). */
  readonly pumpIgnoresCredit?: boolean;
}

const requested = (w: StreamLinkWorld) => w.pulls.reduce((n, p) => n + p.n, 0);

export function amqpStreamLinkModel(options: StreamLinkOptions = {}): SystemModel<StreamLinkWorld> {
  const link = options.link ?? amqpReceiverLinkMachine;
  const pull = options.pull ?? jetStreamPullMachine;

  /** ReceiverLink.pump and JetStreamPull.want, as effects on the world and the engine. */
  const pump = (v: SystemView<StreamLinkWorld>): Effect<StreamLinkWorld>[] => {
    if (!options.pumpIgnoresLink && (!v.hasTag("L", "attached") || !v.world.open)) return [];
    const w = v.world;
    const sent = options.pumpIgnoresCredit ? w.queue : Math.min(w.credit, w.queue);
    const after = { ...w, credit: w.credit - sent, queue: w.queue - sent, unsettled: w.unsettled + sent };
    const effects: Effect<StreamLinkWorld>[] = [world(() => after)];
    const wants = options.pumpIgnoresNats || (v.hasTag("L", "natsUp") && !v.hasTag("L", "draining"));
    if (!wants || !v.live("P")) return effects;
    const uncovered = Math.max(0, after.credit - after.queue);
    if (v.hasTag("P", "asking")) {
      const more = uncovered - requested(after);
      if (more >= 1) effects.push(world((x) => ({ ...x, pulls: [...x.pulls, { n: more, noWait: false }] })));
    } else if (v.inState("P", "holding")) effects.push(send("P", { type: "RESUME" }));
    return effects;
  };

  const drainStart = (v: SystemView<StreamLinkWorld>): Effect<StreamLinkWorld>[] => {
    const w = v.world;
    const uncovered = Math.max(0, w.credit - w.queue);
    const more = uncovered - requested(w);
    if (more <= 0 || !v.live("P")) return [...pump(v), ...drainEnd()];
    return [...pump(v), world((x) => ({ ...x, draining: true })), send("P", { type: "DRAIN", more })];
  };
  // Pumped, then the drain is completed (part 2, 2.6.7: the credit left is consumed) and L is told.
  const drainEnd = (): Effect<StreamLinkWorld>[] => [post("link", { type: "drain done" })];

  const routeLink = (e: EventObject, v: SystemView<StreamLinkWorld>): Effect<StreamLinkWorld>[] => {
    switch (e.type) {
      case "resolve":
        return [post("link", { type: "resolved" })];
      case "attach":
        return [world((w) => ({ ...w, open: true }))];
      case "flow":
        return [postOnce("link", { type: "pump" })];
      case "hold":
        return v.live("P") ? [send("P", { type: "HOLD" })] : [];
      case "drain":
        return [post("link", { type: "drain" })];
      case "detach":
      case "refuse":
        return [world((w) => ({ ...w, open: false }))];
      case "release":
        // cleanup(): the feed closes (the engine stops) and what it held goes back.
        if (options.releaseForgetsFeed) return [world((w) => ({ ...w, queue: 0, unsettled: 0 }))];
        return [
          ...(v.live("P") ? [send<StreamLinkWorld>("P", { type: "STOP" })] : []),
          world((w) => ({ ...w, queue: 0, unsettled: 0, held: 0 })),
        ];
      default:
        return [];
    }
  };

  const routePull = (e: EventObject, v: SystemView<StreamLinkWorld>): Effect<StreamLinkWorld>[] => {
    switch (e.type) {
      case "ask":
        return [postOnce("link", { type: "pump" })];
      case "pull_no_wait": {
        const more = Math.max(0, v.world.credit - v.world.queue) - requested(v.world);
        return more > 0
          ? [world((w) => ({ ...w, pulls: [...w.pulls, { n: more, noWait: true }] }))]
          : [send("P", { type: "DRAINED" })];
      }
      case "drained":
        return v.world.draining ? [world((w) => ({ ...w, draining: false })), ...drainEnd()] : [];
      case "forget_pulls":
        return [world((w) => ({ ...w, pulls: [] }))];
      case "check_consumer":
        return [world((w) => ({ ...w, checking: true }))];
      case "gone":
        return v.live("L")
          ? [send("L", { type: "FAULT", error: { condition: "amqp:resource-deleted", description: "gone" } })]
          : [];
      case "stop":
        return [
          world((w) => ({ ...w, pulls: [], draining: false, checking: false })),
          ...(v.world.draining ? drainEnd() : []),
        ];
      default:
        return [];
    }
  };

  /** The oldest pull ends (it expired, was cut short, got 503 or 409 deleted): JetStreamPull.end and .status. */
  const pullEnds = (v: SystemView<StreamLinkWorld>): WorldEvent<StreamLinkWorld>[] => {
    const first = v.world.pulls[0];
    if (!first) return [];
    const rest = world<StreamLinkWorld>((w) => ({ ...w, pulls: w.pulls.slice(1) }));
    const live = v.live("P");
    if (first.noWait)
      return [
        {
          name: "the no_wait pull ends (404)",
          effects: [rest, ...(live ? [send<StreamLinkWorld>("P", { type: "DRAINED" })] : [])],
        },
      ];
    return [
      { name: "the oldest pull expires (408)", effects: [rest, postOnce("link", { type: "pump" })] },
      {
        name: "the oldest pull is cut short (409)",
        effects: [rest, ...(live ? [send<StreamLinkWorld>("P", { type: "CUT_SHORT" })] : [])],
      },
      {
        name: "the oldest pull gets 503",
        effects: [rest, ...(live ? [send<StreamLinkWorld>("P", { type: "NO_RESPONDERS" })] : [])],
      },
      {
        name: "the consumer is deleted (409)",
        effects: [
          rest,
          ...(live ? [send<StreamLinkWorld>("P", { type: "CONSUMER_GONE", reason: "409 consumer deleted" })] : []),
        ],
      },
    ];
  };

  return {
    kind: "system",
    name: "an AMQP link receiving from a JetStream consumer, and its pull engine",
    bound: `a client granting up to ${PREFETCH} credits, settling, draining and detaching at any point; NATS away and back; the stream delivering into any open pull, each pull expiring, cut short, answered 503 or 409 (deleted); CONSUMER.INFO finding or not; every answer in any order, timers fire at any point`,
    actors: {
      L: { machine: link, input: { detachGraceMs: 5_000 }, abstract: (c) => [c.error !== undefined] },
      P: { machine: pull, input: { onGone: "end", pauseMs: 1_000 }, startsLater: true, abstract: () => 0 },
    },
    world: initialWorld,
    route: (actor, e, v) => (e.type === ENDED.type ? [] : actor === "L" ? routeLink(e, v) : routePull(e, v)),
    handlers: {
      link: (e, v) => {
        switch (e.type) {
          case "resolved":
            // openFeed made the engine; a link that ended meanwhile closes it at once.
            if (!v.live("L")) return [start("P"), send("P", { type: "STOP" })];
            return [start("P"), send("L", { type: "RESOLVED", address: "orders" })];
          case "pump":
            return pump(v);
          case "drain":
            return drainStart(v);
          case "drain done":
            return [
              ...pump(v),
              world((w) => (v.hasTag("L", "attached") && w.open ? { ...w, credit: 0 } : w)),
              ...(v.live("L") ? [send<StreamLinkWorld>("L", { type: "DRAINED" })] : []),
            ];
          default:
            return [];
        }
      },
    },
    events: (v) => {
      const w = v.world;
      const out: WorldEvent<StreamLinkWorld>[] = [];
      const attached = v.hasTag("L", "attached") && w.open;
      if (attached && w.credit + w.unsettled < PREFETCH)
        out.push({
          name: "the client grants a credit",
          effects: [world((x) => ({ ...x, credit: x.credit + 1 })), postOnce("link", { type: "pump" })],
        });
      if (w.unsettled > 0)
        out.push({
          name: "the client accepts a delivery",
          effects: [
            world((x) => ({ ...x, unsettled: x.unsettled - 1, held: x.held - 1 })),
            postOnce("link", { type: "pump" }),
          ],
        });
      if (attached && w.credit > 0) out.push({ name: "the client drains", effects: [send("L", { type: "DRAIN" })] });
      if (v.live("L") && (w.open || v.inState("L", "attaching") || v.inState("L", "detaching")))
        out.push({
          name: "the client detaches",
          effects: [world((x) => ({ ...x, open: false })), postOnce("L", { type: "REMOTE_DETACH" })],
        });
      if (v.live("L"))
        out.push(
          { name: "NATS goes away", effects: [send("L", { type: "NATS_DOWN" })] },
          { name: "NATS is back", effects: [send("L", { type: "NATS_UP" })] },
        );
      const first = w.pulls[0];
      if (first && v.live("P")) {
        // One message into the oldest open pull: JetStreamPull.received, then the feed's offer.
        const rest = first.n > 1 ? [{ ...first, n: first.n - 1 }, ...w.pulls.slice(1)] : w.pulls.slice(1);
        const offered = v.live("L");
        out.push({
          name: "the stream delivers a message",
          effects: [
            world((x) => ({ ...x, pulls: rest, held: x.held + 1, queue: offered ? x.queue + 1 : x.queue })),
            ...(first.n === 1 && first.noWait ? [send<StreamLinkWorld>("P", { type: "DRAINED" })] : []),
            postOnce("link", { type: "pump" }),
          ],
        });
      }
      out.push(...pullEnds(v));
      if (w.checking)
        out.push(
          // The answer arrives: the engine hears it now (an answer to an earlier check is never late: one check at a time).
          {
            name: "CONSUMER.INFO finds the consumer",
            effects: [world((x) => ({ ...x, checking: false })), send("P", { type: "CONSUMER_FOUND" })],
          },
          {
            name: "CONSUMER.INFO says it is gone",
            effects: [world((x) => ({ ...x, checking: false })), send("P", { type: "CONSUMER_GONE", reason: "10014" })],
          },
        );
      return out;
    },
    describeWorld: (w) =>
      `credit ${w.credit}, queued ${w.queue}, unsettled ${w.unsettled}, held ${w.held}, pulls [${w.pulls.map((p) => `${p.n}${p.noWait ? " no_wait" : ""}`).join(", ")}]${w.open ? "" : ", link closed"}${w.draining ? ", draining" : ""}`,
    invariants: [
      systemInvariant(
        "nothing is delivered once the link is not attached (detaching, detached) or the client left",
        null,
        (_: null, step) => {
          if (!step.before || step.after.world.unsettled <= step.before.world.unsettled) return null;
          const where = step.before.snapshot("L");
          return step.before.inState("L", "active") && step.before.world.open
            ? null
            : new Broken(
                `delivered with the link in ${JSON.stringify(where?.value)}${step.before.world.open ? "" : " after the client left"}`,
              );
        },
      ),
      systemInvariant(
        "every message pulled is acknowledged or handed back by the time the link is over",
        null,
        (_: null, step) => {
          if (!step.after.ended("L")) return null;
          if (step.after.live("P")) return new Broken("the link is over and its engine still reads the consumer");
          return step.after.world.held > 0
            ? new Broken(`${step.after.world.held} messages neither acknowledged nor handed back`)
            : null;
        },
      ),
      systemInvariant(
        "nothing is asked of the stream while NATS is away or after the link let go",
        null,
        (_: null, step) => {
          const asked = step.before !== undefined && requested(step.after.world) > requested(step.before.world);
          if (!asked) return null;
          if (!step.after.live("L")) return new Broken("a pull after the link ended");
          return step.after.inState("L", "active.nats.down") ? new Broken("a pull while NATS is away") : null;
        },
      ),
      systemInvariant("the client's credit is never overrun", null, (_: null, step) =>
        step.after.world.credit < 0 || step.after.world.unsettled > PREFETCH
          ? new Broken("more delivered than the client's credit")
          : null,
      ),
    ],
    progress: [
      { name: "can always still end (no deadlock)", after: () => true, using: () => true },
      {
        name: "a drain is answered on the stream's and the engine's answers",
        after: (step) => step.after.inState("L", "active.credit.draining"),
        using: (e) => e.kind === "world" && e.name.startsWith("the ") && !e.name.startsWith("the client"),
        reach: (v) => !v.inState("L", "active.credit.draining"),
      },
    ],
  };
}
