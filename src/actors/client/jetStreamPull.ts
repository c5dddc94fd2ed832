import { createInbox, type Msg, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import type { SnapshotFrom } from "xstate";
import { type JetStreamPullEmitted, jetStreamPullMachine } from "../../machines/jetStreamPull.js";
import { inboxPrefixOf } from "../../vendor/natsjs.js";
import { ActorTasks } from "../actorTasks.js";
import { startChildMachine } from "../machineActor.js";
import type { ActorRegistry } from "../registry.js";
import type { ConnectionFollower, ConnectionPulls } from "./connectionPulls.js";

/** Who reads the consumer: an MQTT session's stored subscription, or an AMQP receiving link. */
export interface PullReader {
  /** A message the consumer delivered; its reply is its ack subject (settle it with `settle`). */
  message(m: Msg): void;
  /** Asking again may be due (a pull ran out, a pause ended, NATS is back): call `want`. */
  refill(): void;
  /** The consumer is gone (only with `onGone: "end"`): the reader ends, and stops the engine. */
  gone?(reason: string): void;
}

export interface JetStreamPullOptions {
  readonly nc: NatsConnection;
  readonly stream: string;
  readonly consumer: string;
  readonly reader: PullReader;
  /** How long one pull waits for messages. */
  readonly expiresMs: number;
  /**
   * Ask only once at least this many messages are wanted and not asked for: 1 asks exactly as
   * far as wanted (an AMQP link's credit); half a window keeps a waiting request at the server
   * while messages flow (an MQTT session's window).
   */
  readonly minBatch?: number;
  readonly onGone: "end" | "retry";
  /**
   * The priority group of a pinned_client consumer (an MQTT session's, pinnedTakeover.ts):
   * every pull names it, and, once the server pinned this reader, the pin id it was given.
   */
  readonly group?: string | undefined;
  readonly registry?: ActorRegistry | undefined;
  /** The connection's engines (NatsSeam.pull): this one holds while it is away and asks again once it is back. */
  readonly connection?: ConnectionPulls | undefined;
}

/** One pull request, answered on an inbox it has to itself while it lasts. */
interface Pull {
  readonly started: number;
  readonly noWait: boolean;
  remaining: number;
  readonly inbox: Inbox;
  readonly timer: ReturnType<typeof setTimeout>;
}

/** A pull's inbox; once the server ended that pull (408, or all of its batch came) the next pull may have it. */
interface Inbox {
  readonly sub: Subscription;
  pull: Pull | undefined;
  /** Its pull lapsed (no end from the server in time): still read until the server's end comes, or this timer lets it go. */
  lapsed?: ReturnType<typeof setTimeout> | undefined;
}

/** A pull cut short before this is asked again only after a pause (and the machine's pause is this long). */
const PAUSE_MS = 1_000;
/**
 * The server ends a pull at its expiry (408); one whose end has not come this much later
 * lapses: the reader may ask again, and its inbox is still read (LAPSED_READ_MS).
 */
const GRACE_MS = 2_000;
const NO_WAIT_GRACE_MS = 5_000;
/**
 * How long a lapsed pull's inbox is still read. The server counts a pull's expiry from when
 * it took the request, which under load (or a stalled event loop here) is seconds after it
 * was sent: it may still send to it after the lapse, and what it sends to an inbox nobody
 * reads is lost to its ack wait, and the pin it gave that pull held for its priority timeout.
 */
const LAPSED_READ_MS = 30_000;

const encoder = new TextEncoder();
/** The acknowledgement bodies (JetStream AckExplicit), encoded once. */
export const ACK = encoder.encode("+ACK");
export const NAK = encoder.encode("-NAK");
export const TERM = encoder.encode("+TERM");
/** Work in progress: the ack wait starts again. */
export const WPI = encoder.encode("+WPI");
/** A NAK that hands the message back after `ms` (past the short while a clustered server keeps stopped requests). */
export const nakAfter = (ms: number): Uint8Array => encoder.encode(`-NAK {"delay":${ms * 1_000_000}}`);

/** Settles one delivery; a closed connection leaves it to come back after its ack wait. */
export function settle(nc: NatsConnection, reply: string, body: Uint8Array): void {
  try {
    nc.publish(reply, body);
  } catch {
    // closed or draining
  }
}

/**
 * Pull requests on `$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`, each with an inbox of its
 * own, so what each pull still owes is known exactly (a drain's no_wait pull among long polls
 * too), and each pull's inbox goes as soon as the pull ends or the engine stops (the server
 * drops a waiting request whose inbox nobody reads). The jetStreamPull machine decides
 * whether to ask at all; each pull and message is plain work here.
 */
export class JetStreamPull implements ConnectionFollower {
  private readonly pulls = new Set<Pull>();
  /** Inboxes of pulls that lapsed, read until the server ends them (Inbox.lapsed). */
  private readonly lapsed = new Set<Inbox>();
  /**
   * The inbox of the last long poll the server ended, kept for the next one: an idle
   * subscription asks again every expiry, and a fresh inbox each time was a SUB and an
   * UNSUB more per renewal for both the gateway and nats-server (its subject tree changes).
   */
  private spare: Inbox | undefined;
  private requested = 0;
  private drainBatch = 0;
  private readonly drains: Array<() => void> = [];
  private readonly api: string;
  private readonly inboxPrefix: string | undefined;
  private readonly minBatch: number;
  /** The id the server pinned this reader with (`Nats-Pin-Id`), sent with each pull. */
  private pinId: string | undefined;
  private readonly machine: ReturnType<typeof startChildMachine<typeof jetStreamPullMachine>>;
  /** Its consumer checks under way (made with the first), interrupted when it stops. */
  private work: ActorTasks | undefined;

  constructor(private readonly o: JetStreamPullOptions) {
    this.api = `$JS.API.CONSUMER.MSG.NEXT.${o.stream}.${o.consumer}`;
    // The connection's own inbox prefix, which its permissions already allow (gateway-own subjects are recognisable).
    this.inboxPrefix = inboxPrefixOf(o.nc);
    this.minBatch = Math.max(1, o.minBatch ?? 1);
    this.machine = startChildMachine(jetStreamPullMachine, {
      input: { onGone: o.onGone, pauseMs: PAUSE_MS },
      registry: o.registry,
      onEmit: (e) => this.command(e),
    });
    o.connection?.add(this);
  }

  /** The server pinned this reader (a pinned_client consumer): its pulls carry the pin id. */
  get pinned(): boolean {
    return this.pinId !== undefined;
  }

  /** Messages asked for and not yet delivered. */
  get asked(): number {
    return this.requested;
  }

  /** The reader could take `n` more messages than it holds: ask for what is not asked for yet. */
  want(n: number): void {
    const state = this.machine.actor.getSnapshot();
    if (!this.isAsking(state)) {
      if (state.matches("holding")) this.machine.actor.send({ type: "RESUME" });
      return;
    }
    const more = n - this.requested;
    if (more >= this.minBatch) this.pull(more, false);
  }

  /** Asks with no_wait for what `n` leaves unasked; resolves once that pull is over (at once when nothing is to ask). */
  drain(n: number): Promise<void> {
    const more = n - this.requested;
    if (more <= 0 || this.machine.actor.getSnapshot().status !== "active") return Promise.resolve();
    return new Promise((resolve) => {
      this.drains.push(resolve);
      this.drainBatch = more;
      this.machine.actor.send({ type: "DRAIN" });
    });
  }

  /** NATS is away: the pulls made may be gone with it. */
  hold(): void {
    this.send({ type: "HOLD" });
  }

  /** ConnectionFollower: its connection went away. */
  connectionLost(): void {
    this.hold();
  }

  /**
   * ConnectionFollower: back; the machine asks the reader again (an AMQP link asks as far as
   * its credit, as on `want`). An engine that pulled while the connection was away (made
   * then) holds first: nats.js drops what was queued meanwhile when it dials again.
   */
  connectionBack(): void {
    const state = this.machine.actor.getSnapshot();
    if (state.status !== "active" || state.matches("gone")) return;
    if (!state.matches("holding")) this.machine.actor.send({ type: "HOLD" });
    this.machine.actor.send({ type: "RESUME" });
  }

  /** The reader is done: nothing more is asked, and the pulls' inboxes go now. */
  stop(): void {
    this.o.connection?.delete(this);
    this.send({ type: "STOP" });
    this.machine.stop();
    this.work?.close();
  }

  private send(
    e:
      | { type: "HOLD" | "STOP" | "CUT_SHORT" | "DRAINED" | "CONSUMER_FOUND" | "NO_RESPONDERS" }
      | { type: "CONSUMER_GONE"; reason: string },
  ): void {
    if (this.machine.actor.getSnapshot().status === "active") this.machine.actor.send(e);
  }

  /** xstate computes a snapshot's tags once, when it makes the snapshot: this is a Set lookup. */
  private isAsking(state: SnapshotFrom<typeof jetStreamPullMachine>): boolean {
    return state.status === "active" && state.hasTag("asking");
  }

  private command(e: JetStreamPullEmitted): void {
    switch (e.type) {
      case "ask":
        // Emitted inside a transition: the reader asks once it is over.
        return queueMicrotask(() => this.o.reader.refill());
      case "pull_no_wait":
        return this.pull(this.drainBatch, true);
      case "drained":
        for (const resolve of this.drains.splice(0)) resolve();
        return;
      case "forget_pulls":
        return this.endAll();
      case "check_consumer":
        // A check that failed past its own catch tells nothing, as one JetStream did not answer.
        this.work ??= new ActorTasks(() => this.send({ type: "CONSUMER_FOUND" }));
        return this.work.run(() => this.checkConsumer());
      case "gone":
        return this.o.reader.gone?.(e.reason);
      case "stop":
        this.endAll();
        for (const resolve of this.drains.splice(0)) resolve();
        return;
    }
  }

  private pull(batch: number, noWait: boolean): void {
    const inbox = (noWait ? undefined : this.takeSpare()) ?? this.openInbox();
    if (!inbox) {
      // The connection is closed or draining.
      return noWait ? this.send({ type: "DRAINED" }) : this.send({ type: "CUT_SHORT" });
    }
    const timeout = noWait ? NO_WAIT_GRACE_MS : this.o.expiresMs + GRACE_MS;
    const pull: Pull = {
      started: Date.now(),
      noWait,
      remaining: batch,
      inbox,
      timer: setTimeout(() => this.end(pull, "lapsed"), timeout),
    };
    pull.timer.unref?.();
    inbox.pull = pull;
    this.pulls.add(pull);
    this.requested += batch;
    const group = this.o.group
      ? `,"group":${JSON.stringify(this.o.group)}${this.pinId ? `,"id":${JSON.stringify(this.pinId)}` : ""}`
      : "";
    const request = noWait
      ? `{"batch":${batch},"no_wait":true${group}}`
      : `{"batch":${batch},"expires":${this.o.expiresMs * 1_000_000}${group}}`;
    try {
      // Buffer.from: the same UTF-8 bytes as TextEncoder, at a fraction of its cost for a short string.
      this.o.nc.publish(this.api, Buffer.from(request, "utf8"), { reply: inbox.sub.getSubject() });
    } catch {
      this.end(pull, "cut short");
    }
  }

  private takeSpare(): Inbox | undefined {
    const spare = this.spare;
    this.spare = undefined;
    return spare;
  }

  private openInbox(): Inbox | undefined {
    const inbox: Omit<Inbox, "sub"> & { sub?: Subscription } = { pull: undefined, lapsed: undefined };
    try {
      inbox.sub = this.o.nc.subscribe(createInbox(this.inboxPrefix), {
        callback: (e, m) => {
          const pull = inbox.pull;
          if (e) return pull ? this.end(pull, "cut short") : undefined;
          if (inbox.lapsed) return this.receivedLate(inbox as Inbox, m);
          this.received(pull, m);
        },
      });
    } catch {
      return undefined;
    }
    return inbox as Inbox;
  }

  private received(pull: Pull | undefined, m: Msg): void {
    if (!m.reply)
      return pull && this.pulls.has(pull)
        ? this.status(pull, m.headers?.code ?? 0, m.headers?.description ?? "")
        : undefined;
    // Sent before the server heard that the pull ended (its inbox is draining), or after the
    // reader stopped: back to the stream at once, for the next pull, not after the ack wait.
    if (!pull || !this.pulls.has(pull) || this.machine.actor.getSnapshot().status !== "active") {
      settle(this.o.nc, m.reply, NAK);
      // An ending pull the server pinned (it waited without an id, and its end had not reached
      // the server): the pin would keep what is handed back from every reader that lives.
      if (this.o.group && m.headers?.get("Nats-Pin-Id")) this.unpin(this.o.group);
      return;
    }
    if (this.o.group) this.pinId = m.headers?.get("Nats-Pin-Id") || this.pinId;
    pull.remaining--;
    this.requested--;
    if (pull.remaining <= 0) this.end(pull, "filled");
    this.o.reader.message(m);
  }

  /**
   * On the inbox of a pull that lapsed: the server still held it. A message is the reader's
   * as any other (with the pin it may carry); the server's end of that pull lets the inbox go.
   */
  private receivedLate(inbox: Inbox, m: Msg): void {
    if (!m.reply) {
      const code = m.headers?.code ?? 0;
      if (code === 100) return;
      // 423: as on a live pull, the pin it named is no longer this reader's.
      if (code === 423) this.pinId = undefined;
      return this.forgetLapsed(inbox).unsubscribe();
    }
    if (this.machine.actor.getSnapshot().status !== "active") return settle(this.o.nc, m.reply, NAK);
    if (this.o.group) this.pinId = m.headers?.get("Nats-Pin-Id") || this.pinId;
    this.o.reader.message(m);
  }

  /** Nothing more is read for a lapsed pull: the caller ends the inbox's subscription it returns. */
  private forgetLapsed(inbox: Inbox): Subscription {
    clearTimeout(inbox.lapsed);
    inbox.lapsed = undefined;
    this.lapsed.delete(inbox);
    return inbox.sub;
  }

  private status(pull: Pull, code: number, description: string): void {
    // 100: a heartbeat or flow control. 404/408: the pull is over. 409: over, for a reason.
    if (code === 100 || code === 0) return;
    if (code === 408 || code === 404) return this.end(pull, "expired");
    // 423: the pin went to another reader (a takeover unpinned this one), or lapsed. Asked
    // again without an id after the pause: a reader that took over pulled within
    // milliseconds of its UNPIN and RESET, so it holds the pin and this pull waits unserved
    // until the session's old connection is closed; a pin that only lapsed is given to
    // this reader again.
    if (code === 423) {
      this.pinId = undefined;
      return this.end(pull, "cut short");
    }
    if (code === 409 && /deleted|push based/i.test(description)) {
      this.end(pull, "quietly");
      return this.send({ type: "CONSUMER_GONE", reason: `${code} ${description}` });
    }
    // No responders: a deleted consumer, or a restarted nats-server whose JetStream has not
    // loaded it yet. Only JetStream can tell.
    if (code === 503) {
      this.end(pull, "quietly");
      return this.send({ type: "NO_RESPONDERS" });
    }
    this.end(pull, "cut short");
  }

  private unpin(group: string): void {
    this.o.nc
      .request(`$JS.API.CONSUMER.UNPIN.${this.o.stream}.${this.o.consumer}`, JSON.stringify({ group }), {
        timeout: 2_000,
      })
      .catch(() => {
        // Not answered: the pin lapses after the consumer's priority_timeout.
      });
  }

  private async checkConsumer(): Promise<void> {
    try {
      const r = await this.o.nc.request(`$JS.API.CONSUMER.INFO.${this.o.stream}.${this.o.consumer}`, "", {
        timeout: 2_000,
      });
      const error = r.json<{ error?: { err_code?: number; description?: string } }>().error;
      // 10014 consumer not found, 10059 stream not found.
      if (error && (error.err_code === 10014 || error.err_code === 10059))
        return this.send({ type: "CONSUMER_GONE", reason: `${error.err_code} ${error.description ?? ""}` });
    } catch {
      // JetStream not answering yet: not known gone; asked again after the pause.
    }
    this.send({ type: "CONSUMER_FOUND" });
  }

  /** A lapsed pull's inbox is still read (receivedLate) until the server ends that pull, or for LAPSED_READ_MS. */
  private keepReading(inbox: Inbox): void {
    this.lapsed.add(inbox);
    inbox.lapsed = setTimeout(() => letGo(this.forgetLapsed(inbox)), LAPSED_READ_MS);
    inbox.lapsed.unref?.();
  }

  private endAll(): void {
    for (const p of [...this.pulls]) this.end(p, "quietly");
    for (const inbox of [...this.lapsed]) this.forgetLapsed(inbox).unsubscribe();
    this.takeSpare()?.sub.unsubscribe();
  }

  /**
   * A pull is over: what it did not bring is not asked for any more; the reader may ask again.
   * "expired" is the server's word (nothing follows it); "lapsed" is our timer's.
   */
  private end(pull: Pull, how: "filled" | "expired" | "lapsed" | "cut short" | "quietly"): void {
    if (!this.pulls.delete(pull)) return;
    clearTimeout(pull.timer);
    const unfilled = Math.max(0, pull.remaining);
    this.requested -= unfilled;
    pull.remaining = 0;
    const { inbox } = pull;
    inbox.pull = undefined;
    if (how === "lapsed") this.keepReading(inbox);
    else if (unfilled > 0 && how !== "expired") letGo(inbox.sub);
    // The server is done with it (408, or all it asked for came): the next long poll's.
    else if (!pull.noWait && how !== "quietly" && !this.spare && this.isAsking(this.machine.actor.getSnapshot()))
      this.spare = inbox;
    else inbox.sub.unsubscribe();
    if (pull.noWait) return this.send({ type: "DRAINED" });
    if (how === "quietly" || unfilled === 0) return;
    // A long poll that ran out is renewed; one the server cut short at once, after a pause.
    if (how === "cut short" || Date.now() - pull.started < PAUSE_MS) return this.send({ type: "CUT_SHORT" });
    this.o.reader.refill();
  }
}

/**
 * Ends a pull the server may still be filling: until it hears the UNSUB, the server can send
 * to the inbox, and a message dropped here would wait out its ack wait (30 s for an AMQP
 * link) before anyone got it. Draining reads until the PONG that follows the UNSUB, and
 * `received` hands what comes meanwhile straight back.
 */
function letGo(sub: Subscription): void {
  sub.drain().catch(() => sub.unsubscribe());
}
