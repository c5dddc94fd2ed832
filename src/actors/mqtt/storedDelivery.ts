import { type ConsumerConfig, DeliverPolicy, JetStreamApiError, type JetStreamManager } from "@nats-io/jetstream";
import type { Msg } from "@nats-io/transport-node";
import {
  type StoredDeliveryEmitted,
  type StoredDeliveryEvent,
  storedDeliveryMachine,
} from "../../machines/storedDelivery.js";
import { parseJsAckReply } from "../../protocol/jsAckReply.js";
import { ActorTasks } from "../actorTasks.js";
import { limitReached } from "../client/jetStreamLimits.js";
import { ACK } from "../client/jetStreamPull.js";
import { missingPermission } from "../client/missingPermission.js";
import type { NatsSeam } from "../client/natsSeam.js";
import { startChildMachine } from "../machineActor.js";
import { AckLedger } from "./ackLedger.js";
import {
  checkPin,
  inPlaceRefused,
  notInPlace,
  PIN_GROUP,
  retakePin,
  takeOver,
  takesOverInPlace,
} from "./pinnedTakeover.js";
import { PullWindow } from "./pullWindow.js";
import { sessionConsumerConfig } from "./sessionConsumers.js";
import {
  type OpenOptions,
  PARK_MS,
  PULL_EXPIRES_MS,
  RETRY_BACKOFF_MAX_MS,
  RETRY_BACKOFF_MS,
  type Recipient,
  type StoredOutcome,
  StoreRefused,
} from "./storedDeliveryOptions.js";

/**
 * A QoS 1/2 subscription of a persistent session on stored subjects reads a durable
 * consumer of the session, kept while the session lives, so what the client did not
 * acknowledge is delivered again when it comes back, in the order stored [MQTT-4.6.0-2..3].
 *
 * A connection that resumes the session reads the same consumer: on nats-server 2.14+ it
 * fences the previous connection's pulls and rewinds to the ack floor before its first
 * pull (pinnedTakeover.ts); elsewhere it creates a consumer that starts above the floor and
 * deletes the previous one. Either way everything above the floor (the higher of the
 * server's and the record's) comes in stream order, and nothing of the previous
 * connection can reach or delay the new one. What the client acknowledged above the floor
 * is acknowledged again without being sent; what it held unacknowledged goes out with its
 * old packet id and DUP (outbound.ts).
 *
 * The store may not answer (a node lost, a leader being elected): the storedDelivery
 * machine then waits and asks again (machines/storedDelivery.ts), and a consumer lost
 * while read is made again from the floor the same way. Every attempt of one incarnation
 * makes the same consumer (name and start), so an attempt whose answer was lost but which
 * the server carried out is taken as made, and no consumer is left behind.
 */

/**
 * A parked delivery's recipient: nobody. What its pulls bring is held (`held`), it makes no
 * consumer (the machine opens none while parked), and what it would log it has no one to
 * tell until a connection adopts it.
 */
const PARKED: Recipient = {
  onMessage() {},
  renamed() {
    throw new Error("a parked stored delivery makes no consumer");
  },
};

/** 10014: consumer not found. */
const CONSUMER_NOT_FOUND = 10014;

export class StoredDelivery {
  /** What the client was sent and acknowledged: its floor, and the replies of what it holds. */
  private readonly ledger: AckLedger;
  /** Reads the consumer while the machine is `reading`. */
  private window: PullWindow | undefined;
  private nats: NatsSeam | undefined;
  /** The consumer read now, or the one a resume takes over until its successor is made. */
  private current: string;
  /** A consumer to take over (a resume, a lost one): read its floor (`ask`), then retire it. */
  private takeover: { readonly name: string; ask: boolean } | undefined;
  /** The consumer the attempts of this incarnation make, once chosen: the same every attempt. */
  private making: { readonly name: string; readonly config: Partial<ConsumerConfig> } | undefined;
  /** Consumers of earlier incarnations still to delete. */
  private readonly retiring = new Set<string>();
  private outcome: StoredOutcome | undefined;
  /** The permission the gateway user lacks, when that refused the last attempt: the log names it. */
  private missing: ReturnType<typeof missingPermission>;
  private readonly settled: Promise<StoredOutcome>;
  private resolveFirst!: (o: StoredOutcome) => void;
  private readonly machine: ReturnType<typeof startChildMachine<typeof storedDeliveryMachine>>;
  private to: Recipient;
  /** Parked (no connection reads it): what its pulls under way brought meanwhile, in order. */
  private held: Msg[] | undefined;
  /** Told when it stops, parked or not: the parked deliveries forget it (parkedDeliveries.ts). */
  private onStopped: (() => void) | undefined;
  /** After a takeover that found an older reader's pull waiting: when that pull has expired (Date.now()). */
  private olderPullsUntil = 0;
  /** Its attempts and retirements under way (made with the first), interrupted when it stops. */
  private work: ActorTasks | undefined;

  private constructor(
    private readonly o: OpenOptions,
    to: Recipient,
  ) {
    this.to = to;
    this.current = o.name;
    this.ledger = new AckLedger(o.resume, o.maxAckPending);
    this.takeover = o.resume ? { name: o.name, ask: true } : undefined;
    this.settled = new Promise((resolve) => (this.resolveFirst = resolve));
    this.machine = startChildMachine(storedDeliveryMachine, {
      input: {
        backoffMs: RETRY_BACKOFF_MS,
        maxBackoffMs: RETRY_BACKOFF_MAX_MS,
        parkMs: Math.min(PARK_MS, o.inactiveMs),
      },
      registry: o.registry,
      onEmit: (e) => this.command(e),
    });
  }

  /** Starts reading; the first attempt's outcome is `first()`, later ones follow by themselves. */
  static start(options: OpenOptions, to: Recipient): StoredDelivery {
    return new StoredDelivery(options, to);
  }

  /** How the first attempt ended (later attempts go on by themselves while waiting). */
  first(): Promise<StoredOutcome> {
    return this.settled;
  }

  /** The consumer the session's record names: the one read now (or still to take over). */
  get name(): string {
    return this.current;
  }

  /** Waiting for the store to answer. */
  get waiting(): boolean {
    const s = this.machine.actor.getSnapshot();
    return s.status === "active" && s.hasTag("waiting");
  }

  private command(e: StoredDeliveryEmitted): void {
    switch (e.type) {
      case "open":
        return this.tasks().run(() => this.attempt());
      case "reading":
        return this.decided({ state: "reading" });
      case "waiting":
        // The first failure and then about once a minute: a storm of waiting sessions is not a storm of lines.
        if (e.attempt !== 1 && e.attempt % 12 !== 0)
          return this.decided({ state: "waiting", reason: e.reason, limit: e.limit });
        this.to.log?.warn(
          { stream: this.o.stream, consumer: this.current, err: e.reason, attempt: e.attempt },
          "stored delivery waiting for its stream",
        );
        return this.decided({ state: "waiting", reason: e.reason, limit: e.limit });
      case "refused":
        this.to.log?.warn(
          { stream: this.o.stream, err: e.reason, ...(this.missing ? { missing_permission: this.missing } : {}) },
          `stored delivery unavailable: ${e.reason}`,
        );
        return this.decided({ state: "refused", reason: e.reason, permission: e.permission });
      case "drop_reader":
        this.window?.stop();
        this.window = undefined;
        return this.lost();
      case "retire":
        return this.tasks().run(() => this.retire());
      case "check_pin":
        return this.tasks().run(async () =>
          this.send(await checkPin(this.o, this.current, this.served, this.olderPullsUntil)),
        );
      case "retake":
        return this.tasks().run(async () =>
          this.send(await retakePin({ ...this.o, log: this.to.log }, this.current, this.served, e)),
        );
      case "stop":
        this.window?.stop();
        this.window = undefined;
        // Left to the next reader's RESET (a takeover), as on any stop.
        this.held = undefined;
        this.ledger.clear();
        this.onStopped?.();
        this.work?.close();
        // A last try for what is still to delete, outliving the delivery (its failures end
        // inside retire); a consumer that stays is removed by the server after its
        // inactive_threshold (the session's expiry).
        if (this.retiring.size > 0) void this.retire();
        return;
    }
  }

  private tasks(): ActorTasks {
    // attempt and retire answer their failures as machine events: what reaches this is a bug.
    this.work ??= new ActorTasks((e) =>
      this.to.log?.error({ stream: this.o.stream, err: String(e) }, "stored delivery failed"),
    );
    return this.work;
  }

  private decided(o: StoredOutcome): void {
    if (this.outcome) return;
    this.outcome = o;
    this.resolveFirst(o);
  }

  private send(e: StoredDeliveryEvent): void {
    if (this.machine.actor.getSnapshot().status === "active") this.machine.actor.send(e);
  }

  /** Pinned, or holding a message (checkPin). */
  private readonly served = (): boolean => this.window?.pinned === true || this.ledger.held > 0;

  /** Stopped by the session: nothing more is read or made. */
  private get ended(): boolean {
    return this.machine.actor.getSnapshot().status !== "active";
  }

  /** One attempt (the machine makes one at a time) to make or find this incarnation's consumer and read it. */
  private async attempt(): Promise<void> {
    try {
      if (this.o.store && (await this.o.store.ensure(this.o.account)) === undefined)
        throw new StoreRefused("no MQTT store in this account");
      const { jsm, lease } = await this.o.services.jetstream(this.o.account);
      const inPlace = takesOverInPlace(lease.nats.info()?.version);
      if (
        !this.making &&
        this.takeover?.ask &&
        inPlace &&
        (await this.takeOverInPlace(jsm, lease.nats, this.takeover.name))
      )
        return;
      if (!this.making) {
        // Only "not found" means no previous consumer: a timeout says nothing, and guessing
        // would start at the stream's end and skip what the session has not read.
        const previous = this.takeover?.ask
          ? await jsm.consumers.info(this.o.stream, this.takeover.name).catch((e: unknown) => {
              if (e instanceof JetStreamApiError && e.code === CONSUMER_NOT_FOUND) return null;
              throw e;
            })
          : undefined;
        // The server's floor may lag the previous connection's last acks; the record's may be
        // missing (a gateway that died wrote none): the higher of the two.
        const floor = Math.max(previous?.ack_floor.stream_seq ?? 0, this.acknowledged().floor);
        this.ledger.raiseFloor(floor);
        // A lost consumer (not asked about) is replaced too.
        const found = previous !== null && this.takeover !== undefined;
        const base = sessionConsumerConfig({
          subjects: this.o.subjects,
          maxAckPending: this.o.maxAckPending,
          inactiveMs: this.o.inactiveMs,
          bucket: this.o.services.sessionsBucketName(),
          pinned: inPlace,
        });
        this.making =
          this.takeover && (found || floor > 0)
            ? {
                name: this.to.renamed(),
                config: { ...base, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: floor + 1 },
              }
            : { name: this.current, config: { ...base, deliver_policy: DeliverPolicy.New } };
      }
      const making = this.making;
      // The same name and configuration every attempt: one the server made already is answered as made.
      await jsm.consumers.add(this.o.stream, { ...making.config, durable_name: making.name });
      if (this.ended) {
        // Made for a subscription that ended meanwhile: a successor the record does not name
        // goes, by a retire that outlives the delivery (as at stop).
        if (making.name !== this.current) {
          this.retiring.add(making.name);
          void this.retire();
        }
        return;
      }
      if (this.takeover && this.takeover.name !== making.name) this.retiring.add(this.takeover.name);
      this.takeover = undefined;
      this.making = undefined;
      this.nats = lease.nats;
      if (making.name !== this.current) {
        this.current = making.name;
        this.to.onConsumer?.(making.name);
      }
      this.window = this.reader(lease.nats, making.name, making.config.priority_groups !== undefined);
      this.send({ type: "OPENED" });
      this.window.start();
      if (this.retiring.size > 0) this.send({ type: "RETIRE" });
    } catch (e) {
      const missing = missingPermission(e);
      this.missing = missing;
      const limit = limitReached(e, this.o.stream);
      const reason = missing
        ? `the gateway user may not ${missing.operation} ${missing.subject}`
        : (limit ?? ((e as Error).message || String(e)));
      const permission = missing !== undefined;
      this.send({
        type: "OPEN_FAILED",
        reason,
        permission,
        refused: permission || e instanceof StoreRefused,
        limit: limit !== undefined,
        // The machine is pure: its waits' jitter is drawn here.
        jitter: Math.random(),
      });
    }
  }

  /** Pulled with overlapping requests (pullWindow.ts) rather than `consume()`. */
  private reader(nats: NatsSeam, consumer: string, pinned: boolean): PullWindow {
    return new PullWindow(
      nats,
      this.o.stream,
      consumer,
      Math.min(this.o.maxAckPending, 256),
      PULL_EXPIRES_MS,
      (m) => this.received(m),
      (reason) => this.send({ type: "CONSUMER_LOST", reason, jitter: Math.random() }),
      this.to.budget,
      pinned ? PIN_GROUP : undefined,
    );
  }

  /**
   * A resume of a pinned consumer (pinnedTakeover.ts): fenced and rewound as its INFO calls
   * for, read. False when it cannot be (gone, made unpinned by an older gateway, refused):
   * replaced the old way. The read starts at the server's ack floor; the record's, if higher, is skipped.
   */
  private async takeOverInPlace(jsm: JetStreamManager, nats: NatsSeam, consumer: string): Promise<boolean> {
    const taken = await takeOver(jsm, this.o.stream, consumer).catch((e: unknown) => {
      // A gateway user whose permissions predate UNPIN and RESET: the old way, said once.
      if (missingPermission(e)) inPlaceRefused(this.to.log, this.o.stream, e);
      if (notInPlace(e) || missingPermission(e)) return undefined;
      throw e;
    });
    if (taken === undefined) return false;
    if (this.ended) return true;
    this.nats = nats;
    this.takeover = undefined;
    // An older reader's pull waited at the INFO: it expires at most one pull's life from now.
    if (taken.olderPulls) this.olderPullsUntil = Date.now() + PULL_EXPIRES_MS;
    this.window = this.reader(nats, consumer, true);
    // Messages waiting, or an older pull that may take the pin: the machine looks that this reader is served (checkPin).
    this.send({ type: "OPENED", awaitPin: taken.watchPin });
    this.window.start();
    return true;
  }

  /** The consumer read is gone: the next attempt makes another from the floor, and deletes this one. */
  private lost(): void {
    this.takeover = { name: this.current, ask: false };
    this.making = undefined;
    this.ledger.skipAcknowledgedAbove();
  }

  private async retire(): Promise<void> {
    try {
      const { jsm } = await this.o.services.jetstream(this.o.account);
      for (const name of [...this.retiring]) {
        await jsm.consumers.delete(this.o.stream, name).catch((e: unknown) => {
          if (!(e instanceof JetStreamApiError && e.code === CONSUMER_NOT_FOUND)) throw e;
        });
        this.retiring.delete(name);
      }
      this.send(this.retiring.size === 0 ? { type: "RETIRED" } : { type: "RETIRE_FAILED", jitter: Math.random() });
    } catch {
      this.send({ type: "RETIRE_FAILED", jitter: Math.random() });
    }
  }

  private received(m: Msg): void {
    const seq = parseJsAckReply(m.reply)?.streamSeq;
    if (seq === undefined) return;
    // Stopped: left for the next connection's consumer, which reads on from the floor.
    if (!this.window || this.ended) return;
    const arrival = this.ledger.arrive(seq, m.reply!);
    if (arrival === "settle") return this.settle(m.reply!, ACK);
    if (arrival === "again") return;
    if (this.held) this.held.push(m);
    else this.to.onMessage(m, seq, this);
  }

  /** The client took the message over (PUBACK / PUBREC), or it is not the client's to have. */
  ack(seq: number): void {
    const reply = this.ledger.ack(seq, this.current);
    if (reply !== undefined) this.settle(reply, ACK);
  }

  /** How far the client has acknowledged (ackLedger.ts): the session record keeps it for the next connection's consumer. */
  acknowledged(): { floor: number; above: number[] } {
    return this.ledger.acknowledged();
  }

  /**
   * The connection ended and the session lives on: parked, if it reads and the client holds
   * nothing of it unacknowledged. It asks for nothing more; what its pulls under way still
   * bring (pinned or not yet) is held for the connection that adopts it. Not parked (false:
   * stop it), the next resume takes the consumer over (UNPIN, RESET): the client's
   * unacknowledged messages come back only so (docs/decisions/session-parking.md).
   * `onStopped`: told if it stops while parked.
   */
  park(onStopped: () => void): boolean {
    const s = this.machine.actor.getSnapshot();
    const reading = s.status === "active" && s.hasTag("reading");
    if (!reading || this.ledger.held > 0 || !this.window) return false;
    this.held = [];
    this.window.pause();
    // What the connection that parked it reached (its socket, session, machines) goes with it:
    // held here, it stayed alive for the whole park (docs/performance.md, "What a resumed session holds").
    this.to = PARKED;
    this.send({ type: "PARK" });
    this.onStopped = onStopped;
    return true;
  }

  /** A resume here reads it on, for `to`: what it held first, in order. False: it stopped meanwhile. */
  adopt(to: Recipient): boolean {
    const s = this.machine.actor.getSnapshot();
    if (s.status !== "active" || !s.hasTag("parked") || !this.window || !this.held) return false;
    const held = this.held;
    this.held = undefined;
    this.onStopped = undefined;
    this.to = to;
    // Never pinned, and an older reader's pull may still wait: it could take the pin (checkPin).
    this.send({ type: "ADOPT", awaitPin: !this.window.pinned && Date.now() < this.olderPullsUntil });
    for (const m of held) {
      const seq = parseJsAckReply(m.reply)?.streamSeq;
      if (seq !== undefined && this.ledger.holds(seq)) to.onMessage(m, seq, this);
    }
    this.window.readOn(to.budget);
    return true;
  }

  /**
   * A SUBSCRIBE of the same filter may read on with it: its first attempt is over, or it takes
   * a session's consumer over from the floor (whenever it opens, nothing is skipped). A
   * SUBSCRIBE's first attempt under way is that SUBSCRIBE's to grant or refuse.
   */
  get transferable(): boolean {
    return !this.ended && (this.outcome !== undefined || this.o.resume !== undefined);
  }

  /** Its subscription was replaced by one of the same filter on this connection: the messages go to it from now. */
  readFor(to: Recipient): void {
    this.to = to;
  }

  /** Stop reading: what the client still holds is read again by the next connection's consumer. */
  stop(): void {
    if (this.ended) return;
    this.decided({ state: "refused", reason: "stopped", permission: false });
    this.send({ type: "STOP" });
    this.machine.stop();
    this.ledger.clear();
  }

  private settle(reply: string, body: Uint8Array): void {
    this.nats?.settle(reply, body);
  }
}
