import { PubHeaders } from "@nats-io/jetstream";
import { type KV, KvWatchInclude } from "@nats-io/kv";
import { headers as natsHeaders } from "@nats-io/transport-node";
import { Effect, type Scope } from "effect";
import { IndexDemand } from "../../protocol/indexDemand.js";
import { type AccountServices, JETSTREAM_TIMEOUT_MS } from "../accountServices.js";
import { ActorTasks } from "../actorTasks.js";
import { StoredPublisher, StoredPublishRefused } from "../client/storedPublisher.js";
import { answersLater } from "../client/storedWrite.js";
import {
  type LoadedSession,
  type SaveOptions,
  SessionMovedOn,
  type SessionStore,
  SessionStoreUnread,
  type StoredSession,
} from "./sessionStore.js";

/**
 * The client ids with a key in one account's sessions bucket, as far as this gateway has
 * seen them. Kept as client ids, decoded once per write seen, rather than as keys: every
 * connect asks, and encoding its client id was most of the question's cost.
 */
interface KeyIndex {
  readonly clientIds: Set<string>;
  /** Listed the bucket, and follows its writes: an absent key is known to be absent. */
  synced: boolean;
  /** A failed index is tried again only after this (Unix ms). */
  retryAt: number;
  /** Ends its watch (the index is dropped: no longer worth its echo). */
  stop?: () => void;
}

const RETRY_MS = 10_000;
/** JSStreamWrongLastSequenceErrF: a conditional write that found a newer record. */
const WRONG_LAST_SEQUENCE = 10071;
/** A removal's marker stays this long (seconds), so every watcher hears it, then goes. */
const MARKER_TTL_SEC = 60;

/**
 * Sessions in the account's `sessions_bucket` KV, shared by every gateway that uses the
 * bucket: a client that reconnects to another gateway finds its session there.
 *
 * Writes that end a connection's hold are conditional on the revision that connection last
 * saw, so a connection that lost the session to a newer one (here or on another gateway)
 * can never overwrite or remove what the newer one wrote. A detached session's record
 * carries a per-message TTL (nats-server 2.11+ `allow_msg_ttl`): the server drops it when
 * the session expires, whether or not the client comes back (docs/decisions/mqtt-sessions.md).
 */
export class KvSessionStore implements SessionStore {
  private readonly indexes = new Map<string, KeyIndex>();
  /** Per account: whether its clean starts are worth an index's echo of every write (protocol/indexDemand.ts). */
  private readonly demand = new Map<string, IndexDemand>();
  /** Every account whose bucket was read or written here, the key index's or not. */
  private readonly used = new Set<string>();
  /**
   * The key indexes' followers, interrupted when the gateway stops. Each answers its own
   * failures (the index is read around, and made again later); one failing past that (a
   * bug) has every index made again, the bucket read meanwhile.
   */
  private readonly followers = new ActorTasks(() => this.indexes.clear());

  constructor(private readonly services: AccountServices) {}

  /** A store whose followers stop when the current Scope closes. */
  static scoped(services: AccountServices): Effect.Effect<KvSessionStore, never, Scope.Scope> {
    return Effect.acquireRelease(
      Effect.sync(() => new KvSessionStore(services)),
      (store) => Effect.sync(() => store.followers.close()),
    );
  }

  async load(account: string, clientId: string): Promise<LoadedSession | undefined> {
    let entry: Awaited<ReturnType<KV["get"]>>;
    this.used.add(account);
    try {
      const kv = await this.services.sessionsBucket(account);
      entry = await kv.get(sessionKey(clientId));
    } catch (e) {
      throw this.unread(e);
    }
    if (entry?.operation !== "PUT" || entry.value.byteLength === 0) return undefined;
    const session = entry.json<StoredSession>();
    const expired = !session.connected && session.expiresAt <= Date.now();
    return { session, revision: entry.revision, expired };
  }

  /** A failed read, told apart as a stored publish's is (client/storedWrite.ts `answersLater`). */
  private unread(e: unknown): SessionStoreUnread {
    const message = (e as Error).message || String(e);
    return new SessionStoreUnread({ message, answersLater: answersLater(e, this.services.serverConnection()) });
  }

  async save(account: string, clientId: string, session: StoredSession, options: SaveOptions = {}): Promise<number> {
    // Known at once here, before the bucket's echo comes back through the watch.
    this.indexes.get(account)?.clientIds.add(clientId);
    this.wrote(account);
    // Buffer.from: TextEncoder's bytes at a fraction of its cost (every resume and drop writes one).
    return this.write(account, clientId, Buffer.from(JSON.stringify(session), "utf8"), options, undefined);
  }

  async remove(account: string, clientId: string, revision?: number): Promise<void> {
    this.wrote(account);
    await this.write(account, clientId, new Uint8Array(), { revision, ttlSec: MARKER_TTL_SEC }, "PURGE");
  }

  /**
   * A JetStream publish on the key's subject (what KV's put does) with the two headers KV's
   * own put cannot take together: the expected revision and the per-message TTL. Sent as a
   * plain publish answered on the connection's ack inbox (client/storedPublisher.ts), not
   * through nats.js's request: every resume and every drop writes its record, and
   * `js.publish` cost several times more of the gateway's CPU (issue 24). Paced in the KV's
   * lane like the reads.
   */
  private async write(
    account: string,
    clientId: string,
    data: Uint8Array,
    options: SaveOptions,
    operation: "PURGE" | undefined,
  ): Promise<number> {
    this.used.add(account);
    await this.services.sessionsBucket(account);
    const { lease, pacer } = await this.services.jetstream(account);
    const h = natsHeaders();
    if (operation) {
      h.set("KV-Operation", operation);
      h.set("Nats-Rollup", "sub");
    }
    if (options.ttlSec !== undefined && this.services.sessionsTtl(account))
      h.set(PubHeaders.MessageTTL, `${Math.max(1, Math.ceil(options.ttlSec))}s`);
    if (options.revision !== undefined) h.set(PubHeaders.ExpectedLastSubjectSequenceHdr, `${options.revision}`);
    const subject = `$KV.${this.services.sessionsBucketName()}.${sessionKey(clientId)}`;
    const publisher = StoredPublisher.of(lease.nats);
    try {
      const ack = await pacer.run(
        JETSTREAM_TIMEOUT_MS,
        () => publisher.publishWith(subject, data, h, JETSTREAM_TIMEOUT_MS),
        "first",
      );
      return ack.seq;
    } catch (e) {
      if (e instanceof StoredPublishRefused && e.errCode === WRONG_LAST_SEQUENCE) throw new SessionMovedOn(clientId);
      throw e;
    }
  }

  /**
   * The accounts whose bucket this gateway has used (the sweeper looks through these): read or
   * written, not only indexed (a gateway whose clients all resume never indexes a bucket).
   */
  accounts(): string[] {
    return [...new Set([...this.used, ...this.indexes.keys()])];
  }

  /**
   * False only when the bucket is known to hold no session of this client: the gateway
   * listed the bucket's keys and follows its writes (docs/decisions/mqtt-sessions.md,
   * "Clean starts without a bucket read"). Errs towards true: then the bucket is read.
   */
  mayHold(account: string, clientId: string): boolean {
    const now = Date.now();
    const demand = this.demandOf(account);
    demand.cleanStart(now);
    const idx = this.indexes.get(account);
    if (!idx) {
      if (demand.worthFollowing(now)) this.followers.run((stop) => this.follow(account, stop));
      return true;
    }
    if (demand.worthDropping(now)) {
      this.unfollow(account, idx);
      return true;
    }
    if (!idx.synced) {
      if (idx.retryAt > 0 && Date.now() >= idx.retryAt) this.followers.run((stop) => this.follow(account, stop));
      return true;
    }
    return idx.clientIds.has(clientId);
  }

  /** A record written here: an index whose clean starts have become few is dropped, even if none comes again. */
  private wrote(account: string): void {
    const now = Date.now();
    const demand = this.demandOf(account);
    demand.write(now);
    const idx = this.indexes.get(account);
    if (idx && demand.worthDropping(now)) this.unfollow(account, idx);
  }

  /** Its echo of every write costs more than the reads it saves now: clean starts read until it pays again. */
  private unfollow(account: string, idx: KeyIndex): void {
    this.indexes.delete(account);
    idx.stop?.();
  }

  private demandOf(account: string): IndexDemand {
    let demand = this.demand.get(account);
    if (!demand) {
      demand = new IndexDemand(Date.now());
      this.demand.set(account, demand);
    }
    return demand;
  }

  /** Watches the bucket's writes first, then lists its keys, so no write falls between the two. */
  private async follow(account: string, stop: AbortSignal): Promise<void> {
    const idx: KeyIndex = { clientIds: new Set(), synced: false, retryAt: 0 };
    this.indexes.set(account, idx);
    const failed = () => {
      idx.synced = false;
      idx.clientIds.clear();
      idx.retryAt = Date.now() + RETRY_MS;
    };
    try {
      const kv = await this.services.sessionsBucket(account);
      const writes = await kv.watch({ include: KvWatchInclude.UpdatesOnly, headers_only: true });
      if (stop.aborted || this.indexes.get(account) !== idx) return writes.stop();
      idx.stop = () => writes.stop();
      this.followers.run(async (stopWrites) => {
        stopWrites.addEventListener("abort", () => writes.stop());
        try {
          for await (const e of writes) {
            if (e.operation === "PUT") idx.clientIds.add(clientIdOf(e.key));
            else idx.clientIds.delete(clientIdOf(e.key));
          }
        } catch {
          // ended below
        }
        // Not followed any more: read the bucket again until a new index is synced.
        if (this.indexes.get(account) === idx) failed();
      });
      // A key listed after its delete came through stays: a needless read, never a missed session.
      for await (const k of await kv.keys()) idx.clientIds.add(clientIdOf(k));
      if (this.indexes.get(account) === idx && idx.retryAt === 0) idx.synced = true;
    } catch {
      if (this.indexes.get(account) === idx) failed();
    }
  }
}

/** KV keys allow `[-/_=.a-zA-Z0-9]`; a client id may hold anything, so it is base64url. */
export function sessionKey(clientId: string): string {
  return Buffer.from(clientId, "utf8").toString("base64url") || "_";
}

/** The client id a session key stands for (a key that is not one decodes to a client id no client has: a needless read at most). */
function clientIdOf(key: string): string {
  return key === "_" ? "" : Buffer.from(key, "base64url").toString("utf8");
}
