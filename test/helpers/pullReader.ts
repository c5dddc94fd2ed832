import type { Msg, NatsConnection } from "@nats-io/transport-node";
import { ACK, type JetStreamPull } from "../../src/actors/client/jetStreamPull.js";
import { NatsSeam } from "../../src/actors/client/natsSeam.js";

/**
 * A pull engine made through the seam of `nc`, as the gateway makes them, whose reader
 * acknowledges everything and asks for ten at a time; what it got goes to `seen`.
 */
export function acknowledgingReader(
  nc: NatsConnection,
  stream: string,
  consumer: string,
  expiresMs: number,
  seen: string[],
): JetStreamPull {
  const seam = NatsSeam.of(nc);
  let pull!: JetStreamPull;
  pull = seam.pull({
    stream,
    consumer,
    reader: {
      message(m: Msg) {
        seen.push(m.string());
        seam.settle(m.reply!, ACK);
        pull.want(10);
      },
      refill: () => pull.want(10),
    },
    expiresMs,
    onGone: "retry",
  });
  pull.want(10);
  return pull;
}
