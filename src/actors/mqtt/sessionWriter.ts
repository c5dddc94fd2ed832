import { SessionMovedOn, type SessionStore, type StoredSession } from "./sessionStore.js";

export interface RecordToWrite {
  readonly session: StoredSession;
  readonly ttlSec?: number | undefined;
}

/**
 * Writes one session's record, one write at a time, each on the revision the previous one
 * left: a connection's SUBSCRIBE, QoS 2 state and detach never race each other, and a write
 * that finds a newer record (another connection of the client id took the session over)
 * stops this writer for good instead of overwriting it. Writes asked for while one is under
 * way are folded into the next, which writes the state as it is then. Once the session's
 * machine has ended (`close`), nothing more is sent: a write it asked for and gave up
 * waiting for (its store timeout) would otherwise go out after the next session of the
 * client id wrote, unconditionally if the write before it failed (found by the model
 * checker, src/modelcheck/systems/mqttClientId.ts).
 */
export class SessionWriter {
  /** The record's revision as this connection last wrote or read it; undefined: write unconditionally. */
  revision: number | undefined;
  /** Why this writer sends nothing more: another connection wrote the record, or the session ended. */
  private stopped: "moved on" | "closed" | undefined;
  private tail: Promise<void> = Promise.resolve();
  private next: { build: () => RecordToWrite; done: Promise<boolean> } | undefined;

  constructor(
    private readonly store: SessionStore,
    private readonly account: string,
    private readonly clientId: string,
    private readonly onMovedOn: () => void,
  ) {}

  /**
   * Writes what `build` gives when this write's turn comes (conditional once a revision is
   * known). Resolves true once written, false when nothing was written (this writer had
   * stopped, or found a newer record): a caller that needs the record to hold its state
   * before going on must not go on then.
   */
  write(build: () => RecordToWrite): Promise<boolean> {
    if (this.next) {
      this.next.build = build;
      return this.next.done;
    }
    const entry = { build, done: Promise.resolve(false) };
    entry.done = this.tail.then(() => {
      if (this.next === entry) this.next = undefined;
      return this.run(() => {
        const { session, ttlSec } = entry.build();
        return this.store.save(this.account, this.clientId, session, { revision: this.revision, ttlSec });
      });
    });
    this.next = entry;
    this.tail = entry.done.then(
      () => {},
      () => {},
    );
    return entry.done;
  }

  /** Removes the record, unless another connection wrote it since this one did. */
  remove(): Promise<boolean> {
    const done = this.tail.then(() =>
      this.run(async () => {
        await this.store.remove(this.account, this.clientId, this.revision);
        return this.revision ?? 0;
      }),
    );
    this.tail = done.then(
      () => {},
      () => {},
    );
    return done;
  }

  /** The session's machine ended: what is still waiting to be sent is dropped. */
  close(): void {
    this.stopped ??= "closed";
  }

  /** Resolves true when the write was made, false when this writer had stopped or found a newer record. */
  private async run(write: () => Promise<number>): Promise<boolean> {
    if (this.stopped) return false;
    try {
      this.revision = await write();
      return true;
    } catch (e) {
      if (!(e instanceof SessionMovedOn)) throw e;
      if (this.stopped) return false;
      this.stopped = "moved on";
      this.onMovedOn();
      return false;
    }
  }
}
