import type { NatsConnection } from "@nats-io/transport-node";
import { flushAndSettle } from "../natsBridge.js";

/**
 * May NATS deliver `subject` to this client? Retained and stored messages are read with
 * the gateway's own user, and a wildcard subscription NATS granted can still be denied
 * some of its subjects (deny lists apply on delivery). An exact subject NATS granted is
 * readable; any other is asked once with a probe subscription on the client's own
 * connection (docs/decisions/faults.md). Undefined: NATS could not be asked.
 */
export class ReadPermission {
  /** Subjects NATS was asked about; bounded. */
  private readonly known = new Map<string, Promise<boolean | undefined>>();

  constructor(
    private readonly nc: NatsConnection,
    /** Subjects NATS refused a subscription to on this connection (claimed by the asker). */
    private readonly deniedSubscribe: Set<string>,
  ) {}

  mayRead(granted: readonly string[], subject: string): true | Promise<boolean | undefined> {
    if (granted.includes(subject)) return true;
    let answer = this.known.get(subject);
    if (!answer) {
      if (this.known.size >= 10_000) this.known.clear();
      answer = this.probe(subject);
      this.known.set(subject, answer);
    }
    return answer;
  }

  private async probe(subject: string): Promise<boolean | undefined> {
    let probe: { unsubscribe(): void } | undefined;
    try {
      // Throws once the connection drains (the client left, its lease let go): unknown.
      probe = this.nc.subscribe(subject, { callback: () => {} });
      // A refused subscription is answered with -ERR before the flush's PONG.
      await flushAndSettle(this.nc);
      return !this.deniedSubscribe.delete(subject);
    } catch {
      this.known.delete(subject);
      return undefined;
    } finally {
      probe?.unsubscribe();
    }
  }
}
