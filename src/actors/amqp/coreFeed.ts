import { clientReply, coreDeliverable } from "../../protocol/deliveryGuard.js";
import { headerPairsReader } from "../client/headerPairs.js";
import type { NatsSeam } from "../client/natsSeam.js";
import { holdReadGrant } from "../client/readGrant.js";
import { type Feed, type FeedSink, unauthorizedRead } from "./feed.js";

/**
 * A live core NATS subscription, which is also the link's read grant (readGrant.ts): NATS
 * withdrawing it ends the link. Nothing is redelivered, so settling is only counting;
 * what the client has no credit for waits in the link's bounded queue.
 */
export function coreFeed(nats: NatsSeam, subject: string, sink: FeedSink): Feed {
  // The pairs from the bytes, one array for a run of equal blocks (so the link reads their metadata once).
  const pairsOf = headerPairsReader();
  const grant = holdReadGrant(
    nats,
    subject,
    (message) => sink.fault(unauthorizedRead(subject, message)),
    (m) => {
      const reply = m.reply || undefined;
      // Never the gateway's own subjects, nor a JetStream delivery routed to an inbox this matches (deliveryGuard.ts).
      if (!coreDeliverable(subject, m.subject, reply)) return;
      sink.offer({ subject: m.subject, headers: pairsOf(m), data: m.data, reply: clientReply(reply) });
    },
  );
  return {
    want: () => {},
    drain: () => Promise.resolve(),
    settle: () => {},
    hold: () => {},
    close: () => grant.release(),
  };
}
