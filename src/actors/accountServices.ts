import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import type { GatewayConfig } from "../config/schema.js";
import type { Logger } from "../log.js";
import { JetStreamApiPacer } from "./client/jetStreamPacing.js";
import type { NatsBridge, NatsLease } from "./client/natsBridge.js";
import type { NatsSeam } from "./client/natsSeam.js";
import { bridgeCredentials } from "./gatewayCredentials.js";
import { isStreamMissing } from "./streamMissing.js";
import { createWithReplicas, reportReplicas } from "./streamReplicas.js";

/** The gateway's own JetStream handles in one client account. */
export interface AccountJetStream {
  readonly lease: NatsLease;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  /** What paces the account's JetStream API and KV requests (client/jetStreamPacing.ts). */
  readonly pacer: JetStreamApiPacer;
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
  /** Each account's JetStream API and KV requests, paced (client/jetStreamPacing.ts). */
  private readonly pacers = new Map<string, JetStreamApiPacer>();
  /** Accounts whose sessions bucket takes a TTL per record (nats-server 2.11+ `allow_msg_ttl`). */
  private readonly ttlBuckets = new Set<string>();

  constructor(
    private readonly bridge: NatsBridge,
    private readonly core: NatsLease,
    private readonly config: () => GatewayConfig,
    private readonly log: Logger,
    /** The core connection's own account, as NATS names it ("" when it cannot tell). */
    private readonly coreAccount: () => Promise<string> = async () => "",
  ) {}

  /**
   * The gateway's own connection, for what the server it reaches says of itself (its INFO:
   * whether it runs JetStream), when an account's JetStream handles cannot be made.
   */
  serverConnection(): NatsSeam {
    return this.core.nats;
  }

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
        } catch (e) {
          // Only a bucket that is not there is made: one that did not answer (a timeout, its
          // leader being elected) is asked again by the next read.
          if (!isStreamMissing(e)) throw e;
          this.log.info({ account, bucket: name }, "creating the MQTT sessions bucket");
          try {
            // A detached session's record is dropped by the server when it expires (markerTTL
            // turns on allow_msg_ttl; the marker tells every gateway's key index).
            const kv = await this.withReplicas("sessions bucket", `KV_${name}`, account, (replicas) =>
              kvm.create(name, { history: 1, replicas, markerTTL: SESSION_MARKER_TTL_MS }),
            );
            this.ttlBuckets.add(account);
            return kv;
          } catch (e) {
            this.log.warn(
              { account, bucket: name, err: (e as Error).message },
              "sessions bucket without per-record TTL (nats-server before 2.11?): expired sessions are swept instead",
            );
            return this.withReplicas("sessions bucket", `KV_${name}`, account, (replicas) =>
              kvm.create(name, { history: 1, replicas }),
            );
          }
        }
        if (info.config.allow_msg_ttl) this.ttlBuckets.add(account);
        else {
          try {
            await jsm.streams.update(stream, {
              allow_msg_ttl: true,
              subject_delete_marker_ttl: SESSION_MARKER_TTL_MS * 1_000_000,
            });
            this.ttlBuckets.add(account);
          } catch (e) {
            this.log.warn(
              { account, bucket: name, err: (e as Error).message },
              "sessions bucket without per-record TTL: expired sessions are swept instead",
            );
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
        } catch (e) {
          if (!isStreamMissing(e)) throw e;
          this.log.info({ account, stream: name }, "creating the retained messages stream");
          await this.withReplicas("retained stream", name, account, (num_replicas) =>
            handles.jsm.streams.add({
              name,
              subjects: [`${RETAINED_PREFIX}>`],
              max_msgs_per_subject: 1,
              allow_direct: true,
              allow_rollup_hdrs: true,
              num_replicas,
            }),
          );
        }
      })();
      this.streams.set(key, ready);
      ready.catch(() => this.streams.delete(key));
    }
    await ready;
    return { name, handles };
  }

  private forget(account: string): void {
    this.handles.delete(account);
    this.buckets.delete(account);
    for (const key of this.streams.keys()) if (key.startsWith(`${account}\u0000`)) this.streams.delete(key);
  }

  /** Creates one of the gateway's streams or buckets with the replicas `mqtt.stream_replicas` asks for (streamReplicas.ts). */
  async withReplicas<T>(
    kind: string,
    name: string,
    account: string,
    create: (replicas: number) => Promise<T>,
  ): Promise<T> {
    const { lease } = await this.jetstream(account);
    return createWithReplicas(
      { kind, name, account },
      lease.nats.info(),
      this.config().mqtt.stream_replicas,
      this.log,
      create,
    );
  }

  /** At start: warns of each of the gateway's existing streams in the account with fewer replicas than wanted. */
  async reportReplicas(account: string): Promise<void> {
    const { mqtt } = this.config();
    const { jsm, lease } = await this.jetstream(account);
    const streams = [`KV_${mqtt.sessions_bucket}`, mqtt.retained_stream, mqtt.messages_stream].filter((s) => s !== "");
    await reportReplicas(account, jsm, lease.nats.info(), mqtt.stream_replicas, streams, this.log);
  }

  private async open(account: string): Promise<AccountJetStream> {
    const users = this.config().gateway_users;
    const user = users[account];
    let lease: NatsLease;
    if (user) {
      lease = await this.bridge.acquire(await bridgeCredentials(user), "gateway");
      // The gateway user removed or revoked: what was opened with it is opened again on next use.
      lease.onGone(() => this.forget(account));
    } else {
      // The core connection is in one account: what it keeps for a client of another
      // account (sessions, retained messages, consumers) would be that account's to read.
      const own = await this.coreAccount();
      if (Object.keys(users).length > 0 || (account !== "" && own !== "" && account !== own)) {
        throw new Error(`no gateway user for account ${JSON.stringify(account)} (gateway_users)`);
      }
      lease = this.core;
    }
    // One pacer per account, kept when its handles are opened again (a gateway user back).
    let pacer = this.pacers.get(account);
    if (!pacer) {
      pacer = new JetStreamApiPacer();
      this.pacers.set(account, pacer);
    }
    pacer.follow(lease);
    return { lease, pacer, ...(await lease.nats.jetStream(JETSTREAM_TIMEOUT_MS, pacer)) };
  }

  /** JetStream API and KV requests waiting for their turn, in every account (mqgw_jetstream_api_waiting). */
  apiWaiting(): number {
    let n = 0;
    for (const p of this.pacers.values()) n += p.queued;
    return n;
  }
}

/** How long one of the gateway's JetStream requests waits for its answer (after its turn, when paced). */
export const JETSTREAM_TIMEOUT_MS = 5_000;

/** How long the marker of an expired or removed session stays, so every watcher hears it. */
const SESSION_MARKER_TTL_MS = 60_000;

/** Retained messages live under this prefix in the retained stream, one per subject. */
export const RETAINED_PREFIX = "$MQG.retained.";
