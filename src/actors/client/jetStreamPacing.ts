import { type NatsConnection, type RequestOptions, TimeoutError } from "@nats-io/transport-node";

/**
 * JetStream API and KV requests the gateway makes in one account, at most `limit` in
 * flight; the rest wait here in order (issue 24). In a reconnect storm every session
 * asks for its record, its consumers' takeover and its record's write at once: thousands
 * of requests sent together queue inside nats-server (whose JetStream API queue drops past
 * 10,000) and time out there, each then asked again. Waiting here costs the server
 * nothing, and a request that could not be sent within its own timeout is answered with
 * nats.js's TimeoutError without ever reaching the server: every caller already treats a
 * timeout as "ask again later" (client/storedWrite.ts `answersLater`), never as a refusal.
 */
export class JetStreamApiPacer {
  private inFlight = 0;
  /** "first": what a CONNECT waits for (its session record); "later": the rest. */
  private readonly lanes: Record<PacedLane, Lane> = { first: new Lane(), later: new Lane() };
  /** The connection the requests go out on, as its machine tells it; none: taken as up. */
  private connection: PacedConnection | undefined;
  private unfollow: (() => void) | undefined;

  constructor(
    readonly limit = API_IN_FLIGHT,
    /** Past this many waiting, a request is answered at once as timed out. */
    readonly maxWaiting = API_MAX_WAITING,
  ) {}

  /**
   * Requests go out on `connection` from now on (the account's lease, opened again after a
   * gateway user came back). While it is down they wait here, within their own timeouts,
   * and go when it is back: nats.js drops what was written while it dialled again, so a
   * request sent then was never heard and timed out (a clean start's read 5 s after a
   * nats-server restart, test/gateway/operations.test.ts).
   */
  follow(connection: PacedConnection): void {
    if (connection === this.connection) return;
    this.unfollow?.();
    this.connection = connection;
    this.unfollow = connection.onStatus((status) => {
      if (status === "up") this.next();
    });
    this.next();
  }

  /** Requests waiting for a slot now. */
  get queued(): number {
    return this.lanes.first.size + this.lanes.later.size;
  }

  /**
   * `send` once a slot is free, within `timeoutMs` of now; else a TimeoutError. A waiting
   * request of the "first" lane is sent before any of the "later" one.
   */
  run<T>(timeoutMs: number, send: () => Promise<T>, lane: PacedLane = "later"): Promise<T> {
    if (this.inFlight < this.limit && this.queued === 0 && this.up()) return this.start(send);
    if (this.queued >= this.maxWaiting) return Promise.reject(this.timeout(`${this.queued} already waiting`));
    return new Promise<T>((resolve, reject) => {
      const entry: Waiting = {
        send: () => this.start(send).then(resolve, reject),
        timer: setTimeout(() => {
          entry.turn = "gone";
          this.lanes[lane].gone++;
          reject(this.timeout(`not sent within ${timeoutMs} ms`));
        }, timeoutMs),
        turn: "waiting",
      };
      this.lanes[lane].push(entry);
    });
  }

  private start<T>(send: () => Promise<T>): Promise<T> {
    this.inFlight++;
    let answer: Promise<T>;
    try {
      answer = send();
    } catch (e) {
      answer = Promise.reject(e);
    }
    return answer.finally(() => {
      this.inFlight--;
      this.next();
    });
  }

  private up(): boolean {
    return this.connection?.connected() ?? true;
  }

  private next(): void {
    while (this.inFlight < this.limit && this.up()) {
      const entry = this.lanes.first.take() ?? this.lanes.later.take();
      if (!entry) return;
      clearTimeout(entry.timer);
      entry.send();
    }
  }

  private timeout(why: string): Error {
    return new TimeoutError({
      cause: new Error(`JetStream API request paced by the gateway: ${why} (${this.limit} in flight)`),
    });
  }
}

export type PacedLane = "first" | "later";

/** What the pacer asks of the connection its requests go out on (a NatsLease). */
export interface PacedConnection {
  connected(): boolean;
  /** `listener` hears each change; the returned function stops that. */
  onStatus(listener: (status: "up" | "down") => void): () => void;
}

/** One lane's waiting requests, in order: a queue without shifting. */
class Lane {
  private readonly waiting: Waiting[] = [];
  /** Where `waiting` starts (entries before it were sent or timed out). */
  private head = 0;
  /** Entries after `head` answered as timed out, still in the array. */
  gone = 0;

  get size(): number {
    return this.waiting.length - this.head - this.gone;
  }

  push(entry: Waiting): void {
    this.waiting.push(entry);
  }

  /** The oldest entry still waiting, taken out; undefined when none waits. */
  take(): Waiting | undefined {
    while (this.head < this.waiting.length) {
      const entry = this.waiting[this.head]!;
      this.waiting[this.head++] = DONE;
      // Answered as timed out while it waited (counted in `gone` then).
      if (entry.turn === "gone") {
        this.gone--;
        continue;
      }
      entry.turn = "gone";
      this.compact();
      return entry;
    }
    this.compact();
    return undefined;
  }

  // Drop the sent prefix now and then, so a long storm does not keep it.
  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.waiting.length) {
      this.waiting.splice(0, this.head);
      this.head = 0;
    }
  }
}

interface Waiting {
  send(): void;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** "gone": sent, or answered as timed out; skipped when its turn comes. */
  turn: "waiting" | "gone";
}

const DONE: Waiting = { send: () => {}, timer: undefined, turn: "gone" };

/**
 * Requests in flight per account and gateway: enough to keep nats-server's JetStream busy
 * (each takes about a millisecond there), few enough that several gateways and accounts
 * together stay well below its 10,000-request API queue.
 */
export const API_IN_FLIGHT = 256;
export const API_MAX_WAITING = 100_000;

/**
 * `nc` with its `request` paced by `pacer`; everything else is `nc`'s own. What the
 * JetStream and KV clients of an account are made with (accountServices.ts).
 */
export function pacedRequests(nc: NatsConnection, pacer: JetStreamApiPacer): NatsConnection {
  const request = (subject: string, payload?: Parameters<NatsConnection["request"]>[1], opts?: RequestOptions) =>
    pacer.run(opts?.timeout ?? DEFAULT_REQUEST_MS, () => nc.request(subject, payload, opts), laneOf(subject));
  return new Proxy(nc, {
    get(target, property) {
      if (property === "request") return request;
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * KV requests go first: a CONNECT waits on its session record (read, then written) before
 * CONNACK for as long as it takes, while a resume waits for its consumers' takeovers at most
 * 2 s (RESUME_WAIT_MS) and then leaves them to their machines. In a storm of 10,000 resumes the records' requests otherwise waited
 * behind 20,000 takeovers, past their timeout (docs/decisions/jetstream-pacing.md).
 */
export function laneOf(subject: string): PacedLane {
  return subject.startsWith("$KV.") || subject.startsWith("$JS.API.DIRECT.GET.KV_") ? "first" : "later";
}

/** nats.js's own default request timeout. */
const DEFAULT_REQUEST_MS = 1_000;
