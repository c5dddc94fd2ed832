// rhea as an AMQP 1.0 client of the gateway, with promises instead of events: attach,
// send with the disposition, collect messages. Every wait has a bound.
import rhea, {
  type Connection,
  type ConnectionOptions,
  type Delivery,
  type EventContext,
  type Message,
  type Receiver,
  type ReceiverOptions,
  type Sender,
  type SenderOptions,
} from "rhea";

export interface AmqpError {
  condition: string;
  description?: string;
}

const WAIT_MS = 10_000;

function bounded<T>(
  what: string,
  run: (resolve: (v: T) => void, reject: (e: Error) => void) => void,
  ms = WAIT_MS,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
    run(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

export class AmqpClient {
  private constructor(readonly conn: Connection) {}

  /** Opens a connection; rejects with the connection's error (SASL refusal included). */
  static open(port: number, options: Partial<ConnectionOptions> = {}): Promise<AmqpClient> {
    const conn = rhea.create_container({ id: options.container_id as string | undefined }).connect({
      host: "127.0.0.1",
      port,
      reconnect: false,
      ...options,
    } as ConnectionOptions);
    return bounded("connection open", (resolve, reject) => {
      conn.once("connection_open", () => resolve(new AmqpClient(conn)));
      // A SASL refusal is a transport error: in the event's context, not in a close frame.
      conn.once("connection_error", (c: EventContext) => reject(asError(c.error ?? c.connection.error)));
      conn.once("disconnected", (c: EventContext) =>
        reject(asError(conn.error ?? c.error ?? { condition: "disconnected" })),
      );
      conn.on("error", () => {});
    });
  }

  /** The close the gateway sent, once it arrives. */
  closed(ms = WAIT_MS): Promise<AmqpError | undefined> {
    return bounded(
      "connection close",
      (resolve) => {
        this.conn.once("connection_close", () => resolve(this.conn.error as AmqpError | undefined));
        this.conn.once("disconnected", () => resolve(this.conn.error as AmqpError | undefined));
      },
      ms,
    );
  }

  sender(options: SenderOptions | string): Promise<Sender> {
    const s = this.conn.open_sender(options);
    return attached(s, "sender");
  }

  receiver(options: ReceiverOptions | string): Promise<Receiver> {
    const r = this.conn.open_receiver(options);
    return attached(r, "receiver");
  }

  /** The error of an attach the gateway refuses (rejects if the link opens). */
  async refused(kind: "sender" | "receiver", options: SenderOptions | ReceiverOptions | string): Promise<AmqpError> {
    const link = kind === "sender" ? this.conn.open_sender(options) : this.conn.open_receiver(options);
    return detached(link, kind);
  }

  close(): Promise<void> {
    return bounded<void>("close", (resolve) => {
      if (this.conn.is_closed()) return resolve();
      this.conn.once("connection_close", () => resolve());
      this.conn.once("disconnected", () => resolve());
      this.conn.close();
    }).catch(() => undefined);
  }
}

function asError(e: unknown): Error & AmqpError {
  const x = (e ?? {}) as AmqpError & { message?: string };
  const err = new Error(`${x.condition ?? "error"}: ${x.description ?? x.message ?? ""}`) as Error & AmqpError;
  err.condition = x.condition ?? "";
  if (x.description !== undefined) err.description = x.description;
  return err;
}

function attached<L extends Sender | Receiver>(link: L, kind: "sender" | "receiver"): Promise<L> {
  return bounded(`${kind} attach`, (resolve, reject) => {
    link.once(`${kind}_open`, () => {
      // A refused link is attached with a null terminus, then detached.
      const remote = (kind === "sender" ? link.target : link.source) as { type?: { typecode: number } } | null;
      // rhea shows a null terminus as a Typed null.
      if (remote && remote.type?.typecode !== 0x40) resolve(link);
    });
    link.once(`${kind}_error`, () => reject(asError(link.error)));
    link.once(`${kind}_close`, () => reject(asError(link.error ?? { condition: "detached" })));
  });
}

/** Resolves with the detach error of a link (for refusals and faults). */
export function detached(link: Sender | Receiver, kind: "sender" | "receiver", ms = WAIT_MS): Promise<AmqpError> {
  return bounded(
    `${kind} detach`,
    (resolve) => {
      link.once(`${kind}_error`, () => resolve(link.error as AmqpError));
      link.once(`${kind}_close`, () => resolve((link.error as AmqpError) ?? { condition: "" }));
    },
    ms,
  );
}

export type Outcome =
  | { state: "accepted" }
  | { state: "rejected"; error: AmqpError }
  | { state: "released" }
  | { state: "modified" };

/** Sends once the link has credit; resolves with the gateway's disposition. */
export function send(sender: Sender, message: Message | Buffer, format?: number): Promise<Outcome> {
  return bounded("disposition", (resolve) => {
    const go = () => {
      const d =
        format === undefined ? sender.send(message as Message) : sender.send(message as Buffer, undefined, format);
      outcomes!.set(d, resolve);
    };
    let outcomes = pending.get(sender);
    if (!outcomes) {
      outcomes = new Map();
      pending.set(sender, outcomes);
      const done = (state: Outcome["state"]) => (c: EventContext) => {
        const r = outcomes!.get(c.delivery!);
        outcomes!.delete(c.delivery!);
        const error = (c.delivery!.remote_state as { error?: AmqpError } | undefined)?.error;
        r?.(state === "rejected" ? { state, error: error ?? { condition: "" } } : ({ state } as Outcome));
      };
      sender.on("accepted", done("accepted"));
      sender.on("rejected", done("rejected"));
      sender.on("released", done("released"));
      sender.on("modified", done("modified"));
    }
    if (sender.sendable()) go();
    else sender.once("sendable", go);
  });
}
const pending = new WeakMap<Sender, Map<Delivery, (o: Outcome) => void>>();

/** Sends presettled (the sender must have been opened with snd_settle_mode 1) once there is credit. */
export function sendSettled(sender: Sender, message: Message): Promise<void> {
  return bounded("credit", (resolve) => {
    const go = () => {
      sender.send(message);
      resolve();
    };
    if (sender.sendable()) go();
    else sender.once("sendable", go);
  });
}

export interface Received {
  message: Message;
  delivery: Delivery;
}

/** Collects a receiver's messages; `next()` waits for the next one, `none(ms)` checks that none comes. */
export function collect(receiver: Receiver) {
  const seen: Received[] = [];
  let taken = 0;
  const waiters: Array<() => void> = [];
  receiver.on("message", (c: EventContext) => {
    seen.push({ message: c.message!, delivery: c.delivery! });
    for (const w of waiters.splice(0)) w();
  });
  const wait = (ms: number) =>
    new Promise<void>((r) => {
      const t = setTimeout(r, ms);
      waiters.push(() => {
        clearTimeout(t);
        r();
      });
    });
  return {
    seen,
    async next(ms = WAIT_MS): Promise<Received> {
      const deadline = Date.now() + ms;
      while (seen.length <= taken) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no message within ${ms} ms (${seen.length} so far)`);
        await wait(left);
      }
      return seen[taken++]!;
    },
    async take(n: number, ms = WAIT_MS): Promise<Received[]> {
      const out: Received[] = [];
      for (let i = 0; i < n; i++) out.push(await this.next(ms));
      return out;
    },
    /** True when nothing more arrived within `ms` (a negative check, so keep ms short). */
    async none(ms = 300): Promise<boolean> {
      const before = seen.length;
      await wait(ms);
      return seen.length === before;
    },
  };
}

/** The body of a received message as text, whatever section it came in. */
export function bodyText(m: Message): string {
  const b = m.body as unknown;
  if (typeof b === "string") return b;
  if (Buffer.isBuffer(b)) return b.toString("utf8");
  const content = (b as { content?: unknown } | undefined)?.content;
  if (Buffer.isBuffer(content)) return content.toString("utf8");
  return JSON.stringify(b);
}

export { rhea };
