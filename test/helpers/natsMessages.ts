import type { Msg, NatsConnection } from "@nats-io/transport-node";

/** The next message on a NATS subject (subscribed now), or a rejection after `ms`. */
export function nextMsg(nc: NatsConnection, subject: string, ms = 5_000): Promise<Msg> {
  const sub = nc.subscribe(subject, { max: 1 });
  return new Promise<Msg>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no NATS message on ${subject}`)), ms);
    void (async () => {
      for await (const m of sub) {
        clearTimeout(t);
        resolve(m);
      }
    })();
  });
}
