import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import type { GatewayConfig } from "../config/schema.js";
import type { Logger } from "../log.js";
import { bridgeCredentials } from "./gatewayCredentials.js";
import type { NatsBridge, NatsLease } from "./natsBridge.js";

/** The gateway's own JetStream handles in one client account. */
export interface AccountJetStream {
  readonly lease: NatsLease;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
}

/**
 * Per account, the gateway's own connection (its gateway user there, or the core
 * connection in the single-account case) and what the gateway keeps in that account:
 * the sessions KV bucket and the retained stream, created on first use (CONTRACT).
 */
export class AccountServices {
  private readonly handles = new Map<string, Promise<AccountJetStream>>();
  private readonly buckets = new Map<string, Promise<KV>>();
  private readonly streams = new Map<string, Promise<void>>();
  /** Accounts whose sessions bucket takes a TTL per record (nats-server 2.11+ `allow_msg_ttl`). */
  private readonly ttlBuckets = new Set<string>();

  constructor(
    private readonly bridge: NatsBridge,
    private readonly core: NatsLease,
    private readonly config: () => GatewayConfig,
    private readonly log: Logger,
  ) {}

  jetstream(account: string): Promise<AccountJetStream> {
    let h = this.handles.get(account);
    if (!h) {
      h = this.open(account);
      this.handles.set(account, h);
      h.catch(() => this.handles.delete(account));
    }
    return h;
  }

  sessionsBucket(account: string): Promise<KV> {
    let b = this.buckets.get(account);
    if (!b) {
      b = this.jetstream(account).then(async ({ js, jsm }) => {
        const kvm = new Kvm(js);
        const name = this.sessionsBucketName();
        const stream = `KV_${name}`;
        let info: Awaited<ReturnType<typeof jsm.streams.info>> | undefined;
        try {
          // open() does not look: ask for the bucket's stream to know whether it exists.
          info = await jsm.streams.info(stream);
        } catch {
          this.log.info({ account, bucket: name }, "creating the MQTT sessions bucket");
          try {
            // A detached session's record is dropped by the server when it expires (markerTTL
            // turns on allow_msg_ttl; the marker tells every gateway's key index).
            const kv = await kvm.create(name, { history: 1, markerTTL: SESSION_MARKER_TTL_MS });
            this.ttlBuckets.add(account);
            return kv;
          } catch (e) {
            this.log.warn({ account, bucket: name, err: (e as Error).message }, "sessions bucket without per-record TTL (nats-server before 2.11?): expired sessions are swept instead");
            return kvm.create(name, { history: 1 });
          }
        }
        if (info.config.allow_msg_ttl) this.ttlBuckets.add(account);
        else {
          try {
            await jsm.streams.update(stream, { allow_msg_ttl: true, subject_delete_marker_ttl: SESSION_MARKER_TTL_MS * 1_000_000 });
            this.ttlBuckets.add(account);
          } catch (e) {
            this.log.warn({ account, bucket: name, err: (e as Error).message }, "sessions bucket without per-record TTL: expired sessions are swept instead");
          }
        }
        return kvm.open(name);
      });
      this.buckets.set(account, b);
      b.catch(() => this.buckets.delete(account));
    }
    return b;
  }

  sessionsBucketName(): string {
    return this.config().mqtt.sessions_bucket;
  }

  /** Whether the account's sessions bucket drops records by their TTL (known once the bucket was opened). */
  sessionsTtl(account: string): boolean {
    return this.ttlBuckets.has(account);
  }

  /** Makes sure the retained stream exists in the account; resolves to its name. */
  async retainedStream(account: string): Promise<{ name: string; handles: AccountJetStream }> {
    const name = this.config().mqtt.retained_stream;
    const handles = await this.jetstream(account);
    const key = `${account}\u0000${name}`;
    let ready = this.streams.get(key);
    if (!ready) {
      ready = (async () => {
        try {
          await handles.jsm.streams.info(name);
        } catch {
          this.log.info({ account, stream: name }, "creating the retained messages stream");
          await handles.jsm.streams.add({
            name,
            subjects: [`${RETAINED_PREFIX}>`],
            max_msgs_per_subject: 1,
            allow_direct: true,
            allow_rollup_hdrs: true,
          });
        }
      })();
      this.streams.set(key, ready);
      ready.catch(() => this.streams.delete(key));
    }
    await ready;
    return { name, handles };
  }

  private async open(account: string): Promise<AccountJetStream> {
    const user = this.config().gateway_users[account];
    const lease = user ? await this.bridge.acquire(await bridgeCredentials(user)) : this.core;
    return { lease, js: jetstream(lease.nc, { timeout: 5_000 }), jsm: await jetstreamManager(lease.nc, { timeout: 5_000 }) };
  }
}

/** How long the marker of an expired or removed session stays, so every watcher hears it. */
const SESSION_MARKER_TTL_MS = 60_000;

/** Retained messages live under this prefix in the retained stream, one per subject. */
export const RETAINED_PREFIX = "$MQG.retained.";
