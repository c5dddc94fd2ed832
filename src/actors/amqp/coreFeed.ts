import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { patternMayMatchAdmin, subjectIsAdmin } from "../../protocol/amqpAddress.js";
import type { Feed, FeedSink } from "./feed.js";

/**
 * A live core NATS subscription. Nothing is redelivered, so settling is only counting;
 * what the client has no credit for waits in the link's bounded queue.
 */
export function coreFeed(nc: NatsConnection, subject: string, sink: FeedSink): Feed {
  // `*.x` and `>` also match $MQG subjects, which no AMQP client may read.
  const guard = patternMayMatchAdmin(subject);
  let sub: Subscription | undefined = nc.subscribe(subject, {
    callback: (e, m) => {
      if (e) {
        sink.fault({
          condition: "amqp:unauthorized-access",
          description: `not authorized to subscribe to ${subject}: ${e.message}`,
        });
        return;
      }
      if (guard && subjectIsAdmin(m.subject)) return;
      sink.offer({ subject: m.subject, headers: m.headers, data: m.data, reply: m.reply || undefined });
    },
  });
  return {
    want: () => {},
    drain: () => Promise.resolve(),
    settle: () => {},
    hold: () => {},
    close: () => {
      sub?.unsubscribe();
      sub = undefined;
    },
  };
}
