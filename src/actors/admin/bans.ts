import type { JetStreamClient } from "@nats-io/jetstream";
import { type KV, Kvm, KvWatchInclude } from "@nats-io/kv";
import { BANS_BUCKET } from "../../config/permissions.js";
import type { Logger } from "../../log.js";
import { ActorTasks } from "../actorTasks.js";
import type { NatsSeam } from "../client/natsSeam.js";
import { once } from "../once.js";
import { isStreamMissing } from "../streamMissing.js";
import { type Ban, type BanKind, BanList, banKey } from "./banList.js";

/** The bans bucket, and the JetStream client a ban with a TTL is published with. */
interface Bucket {
  readonly kv: KV;
  readonly js: JetStreamClient;
  readonly ttl: boolean;
}

/** How long the delete marker of an expired ban stays, so that every watcher hears it. */
const MARKER_TTL_MS = 60_000;
const RETRY_MS = 5_000;
const RETRY_MAX_MS = 60_000;

/**
 * Bans shared by every gateway: a KV bucket in the admin account, read and written on the
 * admin connection and watched by every gateway, so a ban (or its end) applies everywhere
 * as soon as NATS delivers the write. A ban with an expiry carries a per-record TTL where
 * the bucket takes one (nats-server 2.11+), so the bucket forgets it too; the list stops
 * matching it at its `until` either way.
 */
export class Bans {
  readonly list = new BanList();
  private nats: NatsSeam | undefined;
  private bucket: Promise<Bucket> | undefined;
  /** The watch of the bucket on the admin connection now; interrupted when that goes. */
  private readonly watching = new ActorTasks((e) =>
    this.log.error(
      { bucket: BANS_BUCKET, err: String(e) },
      "bans watcher failed: not followed until the next connection",
    ),
  );

  constructor(private readonly log: Logger) {}

  /** The admin connection is (again) serving: follow the bucket on it. */
  follow(nats: NatsSeam): void {
    if (this.nats === nats) return;
    this.stop();
    this.nats = nats;
    this.watching.run((stop) => this.watch(nats, stop));
  }

  stop(): void {
    this.watching.interrupt();
    this.nats = undefined;
    this.bucket = undefined;
  }

  async ban(kind: BanKind, value: string, reason: string | undefined, forMs: number | undefined): Promise<Ban> {
    const { kv, js, ttl } = await this.open();
    const now = Date.now();
    const ban: Ban = {
      kind,
      value,
      ...(reason ? { reason } : {}),
      since: new Date(now).toISOString(),
      ...(forMs !== undefined ? { until: new Date(now + forMs).toISOString() } : {}),
    };
    const data = JSON.stringify(ban);
    const key = banKey(kind, value);
    if (forMs !== undefined && ttl) {
      this.connection(); // throws "the admin connection is down" rather than nats.js's error of a closed one
      await js.publish(`$KV.${BANS_BUCKET}.${key}`, data, { ttl: `${Math.max(1, Math.ceil(forMs / 1000))}s` });
    } else await kv.put(key, data);
    // Known here at once, before the watch brings it back.
    this.list.set(key, ban);
    return ban;
  }

  /** False when there was no such ban. */
  async unban(kind: BanKind, value: string): Promise<boolean> {
    const { kv } = await this.open();
    const key = banKey(kind, value);
    const entry = await kv.get(key);
    if (entry?.operation !== "PUT") return false;
    await kv.purge(key);
    this.list.set(key, undefined);
    return true;
  }

  /** The bans in force, as the bucket holds them now (read, not this gateway's copy, which may lag). */
  async all(): Promise<Ban[]> {
    const { kv } = await this.open();
    const now = new BanList();
    if ((await kv.status()).values > 0) {
      const watch = await kv.watch({ include: KvWatchInclude.LastValue });
      try {
        for await (const e of watch) {
          if (e.operation === "PUT") {
            try {
              now.set(e.key, e.json<Ban>());
            } catch {
              // Not a ban record.
            }
          }
          if (e.delta === 0) break;
        }
      } finally {
        watch.stop();
      }
    }
    return now.inForce();
  }

  private connection(): NatsSeam {
    if (!this.nats || this.nats.isClosed()) throw new Error("the admin connection is down");
    return this.nats;
  }

  /** Opens the bucket, creating it on first use (as the sessions bucket is). */
  private open(): Promise<Bucket> {
    if (!this.bucket) {
      const nats = this.connection();
      const opening = (async (): Promise<Bucket> => {
        const { js, jsm } = await nats.jetStream(5_000);
        const kvm = new Kvm(js);
        try {
          const info = await jsm.streams.info(`KV_${BANS_BUCKET}`);
          return { kv: await kvm.open(BANS_BUCKET), js, ttl: info.config.allow_msg_ttl === true };
        } catch (e) {
          if (!isStreamMissing(e)) throw e;
        }
        this.log.info({ bucket: BANS_BUCKET }, "creating the bans bucket in the admin account");
        try {
          return { kv: await kvm.create(BANS_BUCKET, { history: 1, markerTTL: MARKER_TTL_MS }), js, ttl: true };
        } catch {
          // A nats-server before 2.11 takes no per-record TTL: expired bans stop matching all the same.
          return { kv: await kvm.create(BANS_BUCKET, { history: 1 }), js, ttl: false };
        }
      })();
      this.bucket = opening;
      opening.catch(() => {
        if (this.bucket === opening) this.bucket = undefined;
      });
    }
    return this.bucket;
  }

  /** Follows every write to the bucket from its current values on; tried again while the connection lasts. */
  private async watch(nats: NatsSeam, stop: AbortSignal): Promise<void> {
    let retry: ReturnType<typeof setTimeout> | undefined;
    let iterator: { stop(): void } | undefined;
    stop.addEventListener("abort", () => {
      clearTimeout(retry);
      iterator?.stop();
    });
    // Said once per connection: an admin account without JetStream stays so, and bans are then off.
    const warn = once((err: string) =>
      this.log.warn(
        { bucket: BANS_BUCKET, err },
        "bans bucket not readable (JetStream in the admin account?): bans are not enforced until it is",
      ),
    );
    let waitMs = RETRY_MS;
    while (!stop.aborted && this.nats === nats && !nats.isClosed()) {
      try {
        const { kv } = await this.open();
        const watch = await kv.watch();
        iterator = watch;
        if (stop.aborted) return watch.stop();
        this.list.clear();
        for await (const e of watch) {
          if (e.operation === "PUT") {
            try {
              this.list.set(e.key, e.json<Ban>());
            } catch {
              // Not a ban record: nothing to enforce.
            }
          } else this.list.set(e.key, undefined);
        }
      } catch (e) {
        if (stop.aborted) return;
        warn((e as Error).message);
      }
      if (stop.aborted) return;
      await new Promise<void>((resolve) => {
        retry = setTimeout(resolve, waitMs);
        retry.unref?.();
      });
      waitMs = Math.min(RETRY_MAX_MS, waitMs * 2);
    }
  }
}
