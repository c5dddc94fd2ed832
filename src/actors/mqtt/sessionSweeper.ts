import { type KV, KvWatchInclude } from "@nats-io/kv";
import type { Logger } from "../../log.js";
import type { AccountServices } from "../accountServices.js";
import type { NatsSeam } from "../client/natsSeam.js";
import { aliveSubject } from "../liveness.js";
import type { KvSessionStore } from "./kvSessionStore.js";
import { namedConsumers, removeOrphanConsumers } from "./orphanConsumers.js";
import type { SessionDirectory } from "./sessionDirectory.js";
import { SessionMovedOn, type StoredSession } from "./sessionStore.js";

/** Not a client's key: base64url (sessionKey) never holds a dot. */
const LOCK_KEY = "_sweep.lock";
const PING_TIMEOUT_MS = 1_000;
const decoder = new TextDecoder();

/**
 * What a gateway that dies leaves in the sessions bucket: records marked connected by it,
 * which no TTL ends (a connected session does not expire). One gateway at a time (a lock
 * key in the bucket) looks through the bucket now and then; a record held by a gateway
 * that does not answer `$MQG.alive.<id>` becomes what a disconnect would have written
 * (detached, expiring from now, with its TTL), and on a bucket without per-record TTL
 * (nats-server before 2.11) an expired detached record is removed. Every write is
 * conditional on the revision read, so a client that resumes meanwhile wins. The same pass
 * deletes the session consumers no record names (orphanConsumers.ts).
 */
export class SessionSweeper {
  constructor(
    private readonly services: AccountServices,
    private readonly store: KvSessionStore,
    private readonly directory: SessionDirectory,
    private readonly gatewayId: string,
    private readonly intervalMs: number,
    private readonly log: Logger,
    /** The streams a session of the account may read besides those its records name (the MQTT store, bindings). */
    private readonly streamsOf: (account: string) => Iterable<string> = () => [],
    private readonly onOrphansRemoved: (account: string, n: number) => void = () => {},
  ) {}

  /** One pass over the bucket of each account this gateway has served: how many records it settled. */
  async sweep(accounts: Iterable<string>): Promise<number> {
    let settled = 0;
    for (const account of accounts) {
      try {
        settled += await this.sweepAccount(account);
      } catch (e) {
        this.log.warn({ account, err: (e as Error).message }, "session sweep failed; tried again next time");
      }
    }
    return settled;
  }

  private async sweepAccount(account: string): Promise<number> {
    const kv = await this.services.sessionsBucket(account);
    if (!(await this.takeLock(kv, account))) return 0;
    const { lease, jsm } = await this.services.jetstream(account);
    const alive = new Map<string, Promise<boolean>>();
    const isAlive = (owner: string) => {
      let a = alive.get(owner);
      if (!a) alive.set(owner, (a = ping(lease.nats, owner)));
      return a;
    };
    let settled = 0;
    const records = await this.records(kv);
    for (const [key, revision, session] of records) {
      const clientId = keyClientId(key);
      const now = Date.now();
      try {
        if (session.connected) {
          const owner = session.owner ?? "";
          // Held here: alive if a session of it is open here; otherwise a record of this id's earlier life.
          const gone = owner === this.gatewayId ? !this.directory.holds(account, clientId) : !(await isAlive(owner));
          if (!gone) continue;
          const expirySec = session.expirySec ?? Math.max(0, Math.round((session.expiresAt - now) / 1000));
          await this.store.save(
            account,
            clientId,
            { ...session, connected: false, expiresAt: now + expirySec * 1000 },
            { revision, ttlSec: expirySec },
          );
          settled++;
        } else if (session.expiresAt <= now && !this.services.sessionsTtl(account)) {
          await this.store.remove(account, clientId, revision);
          settled++;
        }
      } catch (e) {
        if (!(e instanceof SessionMovedOn)) throw e;
      }
    }
    if (settled) this.log.info({ account, settled }, "sessions left by gone gateways settled");
    await this.removeOrphans(account, jsm, records);
    return settled;
  }

  private async removeOrphans(
    account: string,
    jsm: Awaited<ReturnType<AccountServices["jetstream"]>>["jsm"],
    records: ReadonlyArray<[string, number, StoredSession]>,
  ): Promise<void> {
    const named = namedConsumers(
      account,
      records.map(([key, , session]) => [keyClientId(key), session]),
    );
    if (!named) return;
    const streams = new Set(this.streamsOf(account));
    for (const [, , session] of records)
      for (const sub of session.subscriptions ?? []) if (sub.stream) streams.add(sub.stream);
    // Two passes old: a resume writes its record within seconds of making its consumer.
    const bucket = this.services.sessionsBucketName();
    const removed = await removeOrphanConsumers(jsm, streams, bucket, named, Date.now(), 2 * this.intervalMs);
    if (removed === 0) return;
    this.onOrphansRemoved(account, removed);
    this.log.info({ account, removed }, "session consumers no record names removed");
  }

  /** The bucket's current records, read in one pass of a watch (not a get per key). */
  private async records(kv: KV): Promise<Array<[string, number, StoredSession]>> {
    const out: Array<[string, number, StoredSession]> = [];
    const status = await kv.status();
    if (status.values === 0) return out;
    const watch = await kv.watch({ include: KvWatchInclude.LastValue });
    for await (const e of watch) {
      if (e.operation === "PUT" && e.key !== LOCK_KEY && e.value.byteLength > 0) {
        try {
          out.push([e.key, e.revision, JSON.parse(decoder.decode(e.value)) as StoredSession]);
        } catch {
          // Not a session record: not ours to settle.
        }
      }
      if (e.delta === 0) break;
    }
    watch.stop();
    return out;
  }

  /**
   * One sweeper per bucket: the lock is created with a TTL of one interval where the bucket
   * takes TTLs; elsewhere a lock older than two intervals is taken over.
   */
  private async takeLock(kv: KV, account: string): Promise<boolean> {
    const value = JSON.stringify({ gateway: this.gatewayId, at: Date.now() });
    const { js } = await this.services.jetstream(account);
    const subject = `$KV.${this.services.sessionsBucketName()}.${LOCK_KEY}`;
    const ttl = this.services.sessionsTtl(account) ? `${Math.max(1, Math.floor(this.intervalMs / 1000))}s` : undefined;
    const entry = await kv.get(LOCK_KEY);
    let expected = 0;
    if (entry?.operation === "PUT") {
      const held = JSON.parse(decoder.decode(entry.value)) as { at?: number };
      if (ttl || Date.now() - (held.at ?? 0) < 2 * this.intervalMs) return false;
      expected = entry.revision;
    } else if (entry) expected = entry.revision;
    try {
      await js.publish(subject, value, { expect: { lastSubjectSequence: expected }, ...(ttl ? { ttl } : {}) });
      return true;
    } catch {
      return false;
    }
  }
}

const keyClientId = (key: string): string => Buffer.from(key, "base64url").toString("utf8");

async function ping(nats: NatsSeam, owner: string): Promise<boolean> {
  if (!owner) return false;
  try {
    await nats.request(aliveSubject(owner), "", PING_TIMEOUT_MS);
    return true;
  } catch {
    return false;
  }
}
