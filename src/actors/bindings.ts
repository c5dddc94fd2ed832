import type { Binding } from "../config/schema.js";
import type { Logger } from "../log.js";
import { patternCovers, patternsOverlap, subjectMatches } from "../protocol/subjects.js";
import type { NatsSeam } from "./client/natsSeam.js";

export interface BoundStream {
  readonly stream: string;
  readonly account: string | null;
  readonly subjects: readonly string[];
}

/** Where a source or target lands with respect to the bound streams. */
export type Coverage =
  | { kind: "unstored" }
  | { kind: "stored"; stream: BoundStream }
  | { kind: "mixed"; reason: string };

/**
 * The operator's bindings, resolved to the subjects of their streams. A subject is
 * *stored* when a bound stream's subjects cover it (CONTRACT "Stored messages").
 */
export class Bindings {
  private streams: BoundStream[] = [];
  /** Streams of bindings the last load could not read: a SIGHUP reads them again (reload.ts). */
  private skipped: string[] = [];

  constructor(
    private readonly log: Logger,
    /** The gateway's own connection in an account (null: the single-account case). */
    private readonly connectionFor: (account: string | null) => Promise<NatsSeam>,
  ) {}

  /** Reads each bound stream's subjects; a missing stream is logged and skipped. */
  async load(bindings: readonly Binding[]): Promise<void> {
    const next: BoundStream[] = [];
    const skipped: string[] = [];
    for (const b of bindings) {
      try {
        const { jsm } = await (await this.connectionFor(b.account)).jetStream(2_000);
        const info = await jsm.streams.info(b.stream);
        next.push({ stream: b.stream, account: b.account, subjects: info.config.subjects ?? [] });
        if (this.skipped.includes(b.stream))
          this.log.info({ stream: b.stream }, "binding read: its stream is readable now");
      } catch (e) {
        skipped.push(b.stream);
        this.log.warn(
          { stream: b.stream, err: (e as Error).message },
          "binding skipped: stream not readable (create the stream, or let the gateway user read it, then send SIGHUP)",
        );
      }
    }
    this.streams = next;
    this.skipped = skipped;
  }

  /** Whether the last load skipped a binding, so that a reload reads the bindings again though the config did not change. */
  hasSkipped(): boolean {
    return this.skipped.length > 0;
  }

  all(): readonly BoundStream[] {
    return this.streams;
  }

  /** The streams bound for `account`. */
  of(account: string): readonly BoundStream[] {
    return this.streams.filter((s) => this.inAccount(s, account));
  }

  /** The stream that stores an exact subject published in `account`, if any. */
  storedIn(account: string, subject: string): BoundStream | undefined {
    for (const s of this.streams) {
      if (!this.inAccount(s, account)) continue;
      if (s.subjects.some((p) => subjectMatches(p, subject))) return s;
    }
    return undefined;
  }

  /** How a (possibly wildcard) source relates to the streams: inside one, outside all, or across. */
  coverage(account: string, source: string): Coverage {
    const touching = this.streams.filter(
      (s) => this.inAccount(s, account) && s.subjects.some((p) => patternsOverlap(p, source)),
    );
    if (touching.length === 0) return { kind: "unstored" };
    const covering = touching.find((s) => s.subjects.some((p) => patternCovers(p, source)));
    if (covering && touching.length === 1) return { kind: "stored", stream: covering };
    if (touching.length > 1)
      return { kind: "mixed", reason: `source ${source} spans streams ${touching.map((s) => s.stream).join(", ")}` };
    return { kind: "mixed", reason: `source ${source} mixes stored and unstored subjects` };
  }

  private inAccount(s: BoundStream, account: string): boolean {
    // In the single-account case bindings name no account and every client shares it.
    return s.account === null || s.account === account;
  }
}
