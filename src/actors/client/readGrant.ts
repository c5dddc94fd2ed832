import type { Msg, Subscription } from "@nats-io/transport-node";
import type { NatsSeam } from "./natsSeam.js";

/**
 * A reader's permission to read `subject`, held where NATS judges it: a subscription on
 * the client's own NATS connection. nats-server says nothing else when a permission is
 * withdrawn: on a config reload (or an account update) it checks every subscription of
 * every connection again and removes those no longer allowed, each with `-ERR
 * 'Permissions Violation for Subscription to "<subject>"'`, which nats.js hands to that
 * subscription's callback. Every reader of either door holds one (docs/decisions/
 * trust-model.md, "Revocation"): an MQTT subscription's own core subscriptions, an AMQP
 * link's core feed, and, for what the gateway reads from a stream with the JetStream API
 * (where NATS never checks the subject), this grant beside the consumer. Its live copies
 * are dropped there: the stream delivers them.
 */
export interface ReadGrant {
  release(): void;
}

export function holdReadGrant(
  nats: NatsSeam,
  subject: string,
  /** NATS refused or withdrew the subscription (its error message). */
  withdrawn: (message: string) => void,
  /** The live messages, for a reader that is served by this very subscription. */
  onMessage?: (m: Msg) => void,
): ReadGrant {
  let sub: Subscription | undefined = nats.subscribe(subject, {
    callback: (e, m) => {
      if (e) {
        sub = undefined;
        withdrawn(e.message);
        return;
      }
      onMessage?.(m);
    },
  });
  return {
    release: () => {
      sub?.unsubscribe();
      sub = undefined;
    },
  };
}
