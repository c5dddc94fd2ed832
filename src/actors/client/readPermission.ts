import type { NatsSeam } from "./natsSeam.js";

/**
 * May NATS deliver `subject` to this client? Retained and stored messages are read with
 * the gateway's own user, and a wildcard subscription NATS granted can still be denied
 * some of its subjects (deny lists apply on delivery). An exact subject NATS granted is
 * readable; any other is asked once with a probe subscription on the client's own
 * connection (docs/decisions/faults.md), and asked again once the answer is PROBE_TTL_MS
 * old (docs/decisions/trust-model.md, "Revocation"). Undefined: NATS could not be asked.
 */
const PROBE_TTL_MS = 5_000;

export class ReadPermission {
  /** Subjects NATS was asked about, and when; bounded. */
  private readonly known = new Map<string, { readonly answer: Promise<boolean | undefined>; readonly at: number }>();

  constructor(
    private readonly nats: NatsSeam,
    /** Subjects NATS refused a subscription to on this connection (claimed by the asker). */
    private readonly deniedSubscribe: Set<string>,
  ) {}

  mayRead(granted: readonly string[], subject: string): true | Promise<boolean | undefined> {
    if (granted.includes(subject)) return true;
    const now = Date.now();
    let known = this.known.get(subject);
    // NATS does not tell when a deny list grows under a granted wildcard: an answer stands a few seconds.
    if (!known || now - known.at > PROBE_TTL_MS) {
      if (this.known.size >= 10_000) this.known.clear();
      known = { answer: this.probe(subject), at: now };
      this.known.set(subject, known);
    }
    return known.answer;
  }

  private async probe(subject: string): Promise<boolean | undefined> {
    let probe: { unsubscribe(): void } | undefined;
    try {
      // Throws once the connection drains (the client left, its lease let go): unknown.
      probe = this.nats.subscribe(subject, { callback: () => {} });
      // A refused subscription is answered with -ERR before the flush's PONG.
      await this.nats.confirm();
      return !this.deniedSubscribe.delete(subject);
    } catch {
      this.known.delete(subject);
      return undefined;
    } finally {
      probe?.unsubscribe();
    }
  }
}
