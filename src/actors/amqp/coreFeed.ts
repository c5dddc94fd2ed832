import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { clientReply, coreDeliverable } from "../../protocol/deliveryGuard.js";
import { headerPairsReader } from "../client/headerPairs.js";
import type { Feed, FeedSink } from "./feed.js";

/**
 * A live core NATS subscription. Nothing is redelivered, so settling is only counting;
 * what the client has no credit for waits in the link's bounded queue.
 */
export function coreFeed(nc: NatsConnection, subject: string, sink: FeedSink): Feed {
  // The pairs from the bytes, one array for a run of equal blocks (so the link reads their metadata once).
  const pairsOf = headerPairsReader();
  let sub: Subscription | undefined = nc.subscribe(subject, {
    callback: (e, m) => {
      if (e) {
        sink.fault({
          condition: "amqp:unauthorized-access",
          description: `not authorized to subscribe to ${subject}: ${e.message}`,
        });
        return;
      }
      const reply = m.reply || undefined;
      // Never the gateway's own subjects, nor a JetStream delivery routed to an inbox this matches (deliveryGuard.ts).
      if (!coreDeliverable(subject, m.subject, reply)) return;
      sink.offer({ subject: m.subject, headers: pairsOf(m), data: m.data, reply: clientReply(reply) });
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
