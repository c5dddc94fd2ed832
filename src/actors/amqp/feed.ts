import type { LinkError } from "../../machines/amqpLink.js";
import type { HeaderEntries } from "../../protocol/headers.js";
import type { ReadGrant } from "../client/readGrant.js";

/** A NATS message waiting for a receiving link's credit; encoded for AMQP only when sent. */
export interface Pending {
  readonly subject: string;
  readonly headers: HeaderEntries | undefined;
  readonly data: Uint8Array;
  readonly reply: string | undefined;
  /** JetStream: the subject its ack goes to, and how often it was delivered before. */
  readonly ack?: { readonly subject: string; readonly redeliveries: number };
}

/**
 * What the client did with an unsettled delivery (part 3, 3.4), as JetStream needs to
 * know it; `skipped`: the link's filter passed over it, so it was never sent.
 */
export type Outcome = "accepted" | "rejected" | "released" | "failed" | "undeliverable" | "skipped";

/** Where a feed puts messages and reports trouble: the receiving link. */
export interface FeedSink {
  offer(m: Pending): void;
  fault(error: LinkError): void;
  /** A pull is over: the feed needs to be told again how much the link wants. */
  refill(): void;
}

/**
 * The NATS side of a receiving link: a core subscription or a JetStream consumer. The
 * link owns credit and the queue; a feed only fetches and settles.
 */
export interface Feed {
  /** The link could take `n` more messages than it holds: a consumer pulls that many. */
  want(n: number): void;
  /** Resolves once what is available now has been offered (a drain's first half). */
  drain(n: number): Promise<void>;
  /** The delivery went out presettled, or the client settled it (`reason`: a rejection's error, as text). */
  settle(m: Pending, outcome: Outcome, reason?: string): void;
  /** NATS is away: ask for nothing until `want` is called again. */
  hold(): void;
  /** The link is going: what never reached a verdict goes back to the stream for others. */
  close(): void;
}

/**
 * A rejected outcome's error as one line of text (`condition: description`), at most 256
 * characters: what JetStream's terminated advisory carries as the reason.
 */
export function rejectionReason(state: unknown): string | undefined {
  const e = (state as { error?: { condition?: unknown; description?: unknown } } | undefined)?.error;
  if (!e) return undefined;
  const text = [e.condition, e.description].filter((x) => typeof x === "string" && x !== "").join(": ");
  const line = text.replace(/[\r\n\t]+/g, " ").trim();
  return line === "" ? undefined : line.slice(0, 256);
}

/** NATS refused or withdrew the client's permission to read `subject` (readGrant.ts). */
export const unauthorizedRead = (subject: string, message: string): LinkError => ({
  condition: "amqp:unauthorized-access",
  description: `not authorized to subscribe to ${subject}: ${message}`,
});

/** A stored feed that lets go of its read grant when it closes. */
export function grantedFeed(feed: Feed, grant: ReadGrant): Feed {
  return {
    want: (n) => feed.want(n),
    drain: (n) => feed.drain(n),
    settle: (m, outcome, reason) => feed.settle(m, outcome, reason),
    hold: () => feed.hold(),
    close: () => {
      grant.release();
      feed.close();
    },
  };
}
