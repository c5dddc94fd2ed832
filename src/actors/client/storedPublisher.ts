import {
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  NoRespondersError,
  PermissionViolationError,
  TimeoutError,
} from "@nats-io/transport-node";
import { readPubAck } from "../../protocol/pubAck.js";
import { inboxOf, type NatsSeam } from "./natsSeam.js";

/** `p`, or a timeout error after `ms` (a flush while NATS is away waits for its return). */
function within(p: Promise<void>, ms: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new TimeoutError()), ms);
    p.then(
      () => {
        clearTimeout(timer);
        resolve();
      },
      (e: Error) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

/**
 * The stream refused a publish (its answer carried an error): `errCode` is JetStream's own
 * (10071: a conditional write that found a newer last sequence on the subject).
 */
export class StoredPublishRefused extends Error {
  constructor(
    message: string,
    readonly errCode: number | undefined,
  ) {
    super(message);
  }
}

/** A stream's answer to a publish, as it sends it (JSON). */
interface PubAnswer {
  readonly stream?: string;
  readonly seq?: number;
  readonly duplicate?: boolean;
  readonly error?: { readonly description?: string; readonly code?: number; readonly err_code?: number };
}

/** The stream's answer to a stored publish. */
export interface StoredAck {
  readonly stream: string;
  readonly seq: number;
  readonly duplicate: boolean;
}

interface Waiter {
  readonly subject: string;
  readonly resolve: (ack: StoredAck) => void;
  readonly reject: (e: Error) => void;
  readonly deadline: number;
}

const SWEEP_MS = 250;

/**
 * The connection may not subscribe to the inbox the stream's acknowledgements come to:
 * nothing is published, since a message stored without a readable ack would be stored
 * and still refused (issue 13). Answered like a permission denial (0x87, amqp:unauthorized-access).
 */
export class AckInboxDenied extends Error {
  constructor(readonly inbox: string) {
    super(`not authorized to subscribe to ${inbox}, where the stream's acknowledgement of a stored publish arrives`);
  }
}

/**
 * JetStream publishes on one NATS connection, without nats.js's request machinery
 * (docs/performance.md): each publish is a plain publish whose reply subject is a token
 * under one wildcard inbox subscription, and the stream's ack is matched by that token.
 * `js.publish` spends most of its 40–75 µs building error objects and a timer per
 * request; this costs about 8 µs. Same contract: the promise settles with the stream's
 * ack, or fails on a JetStream error, on "no responders" (no stream took the subject) or
 * after the timeout. Shared by every client on the connection (clients with the same
 * credentials), each waiting only for its own acks.
 *
 * A publish NATS refuses (the client's user may not publish the subject) gets no reply at
 * all: the server answers `-ERR 'Permissions Violation for Publish to "<subject>"'`,
 * which nats.js reports as a status of the connection. The waiters on that subject fail
 * at once instead of at the timeout (docs/decisions/faults.md).
 */
export class StoredPublisher {
  private static readonly byConnection = new WeakMap<NatsConnection, StoredPublisher>();

  static of(nats: NatsSeam): StoredPublisher {
    let p = StoredPublisher.byConnection.get(nats.nc);
    if (!p) {
      p = new StoredPublisher(nats);
      StoredPublisher.byConnection.set(nats.nc, p);
    }
    return p;
  }

  private readonly prefix: string;
  private readonly waiting = new Map<string, Waiter>();
  private next = 0;
  /** The inbox subscription: being confirmed by a flush, or confirmed (then publishes go out at once). */
  private inbox: Promise<void> | "granted" | undefined;
  private sweeper: ReturnType<typeof setInterval> | undefined;

  /** The connection it publishes on (`nats.nc`, kept at hand: every publish uses it). */
  readonly nc: NatsConnection;

  private constructor(readonly nats: NatsSeam) {
    this.nc = nats.nc;
    // _INBOX.MQGW.<id> on a client's connection: recognisably the gateway's (deliveryGuard.ts).
    this.prefix = `${inboxOf(this.nc)}.`;
    // Lives as long as the NATS connection, not an actor: its status iterator ends when it closes, and its failure is caught inside.
    void this.watchDenials();
  }

  private async watchDenials(): Promise<void> {
    try {
      for await (const s of this.nc.status()) {
        if (s.type !== "error") continue;
        const e = s.error;
        if (e instanceof PermissionViolationError && e.operation === "publish" && e.subject) {
          // After this turn's other status listeners: the connection's one records the
          // subject as denied (link.denied), which is how the publisher answers "not authorized".
          setImmediate(() => this.failSubject(e.subject, e));
        }
      }
    } catch {
      // The connection is gone; its waiters time out or were failed by failAll.
    }
  }

  /** Every publish waiting on a subject NATS refused: none of them will be answered. */
  private failSubject(subject: string, e: Error): void {
    for (const [token, w] of this.waiting) {
      if (w.subject === subject) {
        this.waiting.delete(token);
        w.reject(e);
      }
    }
  }

  /**
   * Publishes with a header block made by `headerBlock` (natsHeaders.ts: Nats-Msg-Id set,
   * as `js.publish` does; one block serves a core copy and the stored one).
   */
  publishWith(subject: string, payload: Uint8Array, h: MsgHdrs, timeoutMs: number): Promise<StoredAck> {
    if (this.inbox === "granted") return this.send(subject, payload, h, timeoutMs);
    return within(this.confirmInbox(), timeoutMs).then(() => this.send(subject, payload, h, timeoutMs));
  }

  /**
   * Subscribes the ack inbox and waits for NATS to have judged it (a refusal comes as
   * -ERR before the flush's PONG, and nats.js closes the subscription) before the first
   * publish: a publish the stream stored but whose ack cannot come back must not happen.
   */
  private confirmInbox(): Promise<void> {
    if (this.inbox instanceof Promise) return this.inbox;
    const sub = this.nc.subscribe(`${this.prefix}*`, { callback: (e, m) => (e ? this.failAll(e) : this.onReply(m)) });
    const confirming = this.nc
      .flush()
      .then(() => new Promise<void>((resolve) => setImmediate(resolve)))
      .then(() => {
        if (sub.isClosed()) throw new AckInboxDenied(`${this.prefix}*`);
        this.inbox = "granted";
      });
    this.inbox = confirming;
    // Tried again by the next publish: permissions may change.
    confirming.catch(() => {
      if (this.inbox === confirming) this.inbox = undefined;
    });
    return confirming;
  }

  private send(subject: string, payload: Uint8Array, h: MsgHdrs, timeoutMs: number): Promise<StoredAck> {
    const token = (this.next++).toString(36);
    return new Promise<StoredAck>((resolve, reject) => {
      this.waiting.set(token, { subject, resolve, reject, deadline: Date.now() + timeoutMs });
      this.sweeper ??= setInterval(() => this.sweep(), SWEEP_MS).unref();
      try {
        this.nc.publish(subject, payload, { headers: h, reply: this.prefix + token });
      } catch (e) {
        this.waiting.delete(token);
        reject(e as Error);
      }
    });
  }

  private onReply(m: Msg): void {
    const token = m.subject.slice(this.prefix.length);
    const w = this.waiting.get(token);
    if (!w) return;
    this.waiting.delete(token);
    // The usual answer, read without JSON.parse; anything else (errors) below.
    const fast = readPubAck(m.data);
    if (fast) return w.resolve(fast);
    if (m.data.length === 0 && m.headers?.code === 503)
      // As nats.js's JetStream reports it: "not enabled", caused by no responders (storedWrite.ts answersLater).
      return w.reject(
        new Error("jetstream is not enabled (no responders)", { cause: new NoRespondersError(w.subject) }),
      );
    let v: PubAnswer;
    try {
      v = m.json();
    } catch {
      return w.reject(new Error("invalid ack response"));
    }
    if (v.error)
      return w.reject(
        new StoredPublishRefused(v.error.description ?? `JetStream error ${v.error.code ?? ""}`, v.error.err_code),
      );
    if (!v.stream) return w.reject(new Error("invalid ack response"));
    w.resolve({ stream: v.stream, seq: v.seq ?? 0, duplicate: v.duplicate === true });
  }

  /** The inbox subscription failed (refused by NATS permissions, closed): nothing will answer. */
  private failAll(e: Error): void {
    this.inbox = undefined;
    for (const w of this.waiting.values()) w.reject(e);
    this.waiting.clear();
  }

  private sweep(): void {
    const now = Date.now();
    for (const [token, w] of this.waiting) {
      if (w.deadline <= now) {
        this.waiting.delete(token);
        w.reject(new TimeoutError());
      }
    }
    if (this.waiting.size === 0 && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }
}
