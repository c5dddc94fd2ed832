import {
  DiscardPolicy,
  JetStreamApiError,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from "@nats-io/jetstream";
import { type MsgHdrs, PermissionViolationError } from "@nats-io/transport-node";
import type { GatewayConfig } from "../config/schema.js";
import type { Logger } from "../log.js";
import type { AccountServices } from "./accountServices.js";
import { StoredPublisher } from "./client/storedPublisher.js";
import {
  answersLater,
  isNoResponders,
  isTimeout,
  pauseAfter,
  publishPatiently,
  STORED_ANSWER_MS,
  type Turn,
} from "./client/storedWrite.js";
import { isStreamMissing } from "./streamMissing.js";

/** A QoS 1/2 message on `<subject>` is kept in the MQTT store as `$MQG.msgs.<subject>`. */
export const MSGS_PREFIX = "$MQG.msgs.";

/** What a write came to: kept (or already kept: a resend), or there is no store in the account. */
export type StoreOutcome = "stored" | "duplicate" | "no_store";

const STREAM_NOT_FOUND = 10059;
const STREAM_NAME_IN_USE = 10058;
const JETSTREAM_NOT_ENABLED_FOR_ACCOUNT = 10039;
const NO_STORE: Promise<StoreOutcome> = Promise.resolve("no_store");
/** An account found to have no store is asked again after this. */
const RETRY_MS = 10_000;

/**
 * The MQTT store (docs/decisions/mqtt-store.md): QoS 1/2 messages that MQTT and AMQP
 * clients publish to subjects no binding stores, kept for persistent MQTT sessions in one
 * stream per client account (`mqtt.messages_stream`, default MQGW_MSGS, on `$MQG.msgs.>`,
 * interest retention: a message stays while a session's consumer still has to read it,
 * and one no consumer's filter matches is not kept at all).
 *
 * Written by the gateway user, after NATS took the client's own core publish of the
 * plain subject (so nothing a client may not publish is stored), with the publish's
 * Nats-Msg-Id (so a resend is kept once). One writer for both doors.
 */
export class MessageStore {
  /** Accounts whose stream is known to be there: writes go out at once, in call order. */
  private readonly ready = new Map<string, StoredPublisher>();
  private readonly preparing = new Map<string, Promise<StoredPublisher | undefined>>();
  /** Accounts without a store (no JetStream, the stream cannot be made): when to ask again. */
  private readonly absentUntil = new Map<string, number>();
  private readonly warned = new Set<string>();
  private seen: GatewayConfig | undefined;

  constructor(
    private readonly services: AccountServices,
    private readonly config: () => GatewayConfig,
    private readonly log: Logger,
    /** How long a write may wait for the store's answer (client/storedWrite.ts). */
    private readonly answerMs = STORED_ANSWER_MS,
  ) {}

  /** The stream's name in this config. */
  streamName(): string {
    return this.config().mqtt.messages_stream;
  }

  /** False when the operator turned the store off (`mqtt.messages_stream: ""`). */
  enabled(): boolean {
    return this.streamName() !== "";
  }

  /**
   * Keeps a copy of a message the client's connection published on `subject`, with the
   * header block (Nats-Msg-Id included) of that publish. Fails when a store exists and did
   * not acknowledge the copy: the publish must then be refused (a session may need it).
   */
  write(account: string, subject: string, payload: Uint8Array, headers: MsgHdrs, turn?: Turn): Promise<StoreOutcome> {
    this.followReload();
    if (!this.enabled()) return NO_STORE;
    const publisher = this.ready.get(account);
    if (publisher) return this.send(account, publisher, subject, payload, headers, turn, this.answerMs);
    // The bound covers finding the stream and storing the copy, from when the write began.
    const deadline = Date.now() + this.answerMs;
    return this.prepareWithin(account, turn ? deadline : 0).then((p) =>
      p ? this.send(account, p, subject, payload, headers, turn, Math.max(1, deadline - Date.now())) : "no_store",
    );
  }

  /**
   * The account's store, looked for again while NATS or its JetStream is coming back (the
   * look timed out, or a server with JetStream answered "no responders": still loading its
   * streams after a restart), until `deadline`; 0: one look (AMQP's store copies, whose
   * single wait is their answer). A loading JetStream is not "no store": taken for one, the
   * copy would be skipped and the publish acknowledged unkept.
   */
  private async prepareWithin(account: string, deadline: number): Promise<StoredPublisher | undefined> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.prepare(account);
      } catch (e) {
        if (!(e instanceof ComingBack)) throw e;
        const pause = pauseAfter(e.cause, attempt);
        if (deadline - Date.now() <= pause) throw e.cause;
        if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
      }
    }
  }

  /** Makes sure the account's stream exists (a subscriber may come before any publish); its name, or undefined without a store. */
  async ensure(account: string): Promise<string | undefined> {
    this.followReload();
    if (!this.enabled()) return undefined;
    // Not reachable yet: thrown (the caller's attempt fails and is made again), not "no store".
    return (await this.prepareWithin(account, 0)) ? this.streamName() : undefined;
  }

  /** After a reload (SIGHUP) each account's stream is looked at again: a new name, new limits. */
  private followReload(): void {
    const config = this.config();
    if (config === this.seen) return;
    this.seen = config;
    this.ready.clear();
    this.absentUntil.clear();
  }

  private async send(
    account: string,
    publisher: StoredPublisher,
    subject: string,
    payload: Uint8Array,
    headers: MsgHdrs,
    turn: Turn | undefined,
    boundMs: number,
  ): Promise<StoreOutcome> {
    try {
      // Sent again while the store does not answer (a node lost, JetStream loading), within the bound.
      const ack = await publishPatiently(
        publisher.nats,
        publisher,
        MSGS_PREFIX + subject,
        payload,
        headers,
        turn,
        boundMs,
      );
      return ack.duplicate ? "duplicate" : "stored";
    } catch (e) {
      // No stream took it: deleted since it was made. Made again for the next write; this one is refused.
      if (isNoResponders(e)) this.ready.delete(account);
      throw e;
    }
  }

  private prepare(account: string): Promise<StoredPublisher | undefined> {
    const known = this.ready.get(account);
    if (known) return Promise.resolve(known);
    if ((this.absentUntil.get(account) ?? 0) > Date.now()) return Promise.resolve(undefined);
    let p = this.preparing.get(account);
    if (p) return p;
    p = this.open(account).finally(() => this.preparing.delete(account));
    this.preparing.set(account, p);
    return p;
  }

  private async open(account: string): Promise<StoredPublisher | undefined> {
    let handles: Awaited<ReturnType<AccountServices["jetstream"]>> | undefined;
    try {
      handles = await this.services.jetstream(account);
      await this.ensureStream(account, handles.jsm);
    } catch (e) {
      // NATS or JetStream on its way back (nats.js reports a loading JetStream as "not enabled"): ask again.
      if (isTimeout(e) || (handles && answersLater(e, handles.lease.nats))) throw new ComingBack(e);
      if (!isAbsent(e)) throw e; // unknown (NATS away, JetStream busy): the write is refused, not skipped
      this.absentUntil.set(account, Date.now() + RETRY_MS);
      if (!this.warned.has(account)) {
        this.warned.add(account);
        this.log.warn(
          { account, stream: this.streamName(), err: (e as Error).message },
          "no MQTT store in this account: QoS 1/2 messages to unbound subjects are delivered live only, not kept for offline sessions",
        );
      }
      return undefined;
    }
    this.absentUntil.delete(account);
    const publisher = StoredPublisher.of(handles.lease.nats);
    this.ready.set(account, publisher);
    return publisher;
  }

  /** Creates the stream, or brings an existing one's limits to the config's. */
  private async ensureStream(account: string, jsm: JetStreamManager): Promise<void> {
    const { mqtt } = this.config();
    const name = mqtt.messages_stream;
    const limits = { max_bytes: mqtt.messages_max_bytes, max_age: mqtt.messages_max_age * 1_000_000 };
    let existing: StreamConfig | undefined;
    try {
      existing = (await jsm.streams.info(name)).config;
    } catch (e) {
      if (!isStreamMissing(e)) throw e;
    }
    if (!existing) {
      this.log.info({ account, stream: name }, "creating the MQTT store (QoS 1/2 messages for offline sessions)");
      try {
        await this.services.withReplicas("MQTT store", name, account, (num_replicas) =>
          jsm.streams.add({
            name,
            subjects: [`${MSGS_PREFIX}>`],
            retention: RetentionPolicy.Interest,
            storage: StorageType.File,
            discard: DiscardPolicy.Old,
            num_replicas,
            max_consumers: STORE_MAX_CONSUMERS,
            ...limits,
          }),
        );
      } catch (e) {
        // Made by another gateway meanwhile: use it.
        if (e instanceof JetStreamApiError && e.code === STREAM_NAME_IN_USE) return;
        // No stream, so no session's consumer reads one: nothing is lost by keeping nothing.
        throw new NoStore(e as Error);
      }
      return;
    }
    const wanted = { ...limits, max_consumers: Math.max(existing.max_consumers, STORE_MAX_CONSUMERS) };
    if (
      existing.max_bytes !== wanted.max_bytes ||
      existing.max_age !== wanted.max_age ||
      existing.max_consumers !== wanted.max_consumers
    ) {
      this.log.info({ account, stream: name, ...wanted }, "MQTT store limits changed: updating the stream");
      await jsm.streams.update(name, { ...existing, ...wanted }).catch((e: Error) => {
        // The stream works with its old limits; the operator learns why the new ones did not apply.
        this.log.warn({ account, stream: name, err: e.message }, "could not update the MQTT store's limits");
      });
    }
  }
}

/**
 * The MQTT store's own consumer limit: one consumer per stored subscription of each
 * persistent session (docs/decisions/consumer-limits.md), where nats-server 2.15 would give
 * the stream 1,000 and stop the 501st session of two stored filters.
 */
export const STORE_MAX_CONSUMERS = 100_000;

/** The store could not be looked at yet: NATS or its JetStream is coming back (the cause says how). */
class ComingBack extends Error {
  declare readonly cause: unknown;
  constructor(cause: unknown) {
    super(`the MQTT store is not reachable yet: ${(cause as Error).message}`, { cause });
  }
}

/** The stream is not there and could not be made (limits, placement, permissions): the cause says why. */
class NoStore extends Error {
  constructor(cause: Error) {
    super(`the stream could not be created: ${cause.message}`, { cause });
  }
}

/** No store can be there: no JetStream in the account, the stream could not be made, or the gateway user may not manage it. */
function isAbsent(e: unknown): boolean {
  if (e instanceof NoStore || (e as Error)?.name === "JetStreamNotEnabled") return true;
  if (e instanceof JetStreamApiError)
    return e.code === JETSTREAM_NOT_ENABLED_FOR_ACCOUNT || e.code === STREAM_NOT_FOUND;
  for (let c: unknown = e; c; c = (c as { cause?: unknown }).cause)
    if (c instanceof PermissionViolationError) return true;
  return false;
}
