/** The fixed header's packet type of PUBLISH (MQTT 2.2.1). */
const PUBLISH = 3;

/**
 * The SUBSCRIBEs of one connection not yet in effect, and whether a packet must wait for
 * them. A client that sends SUBSCRIBE and, without waiting for the SUBACK, a PUBLISH on a
 * topic it subscribed to expects its own message back, as a broker that reads packets in
 * order gives it (mosquitto does). A stored subscription is in effect only once its
 * consumer is made, a JetStream round trip after the SUBSCRIBE was read; a QoS 1 PUBLISH
 * handled meanwhile was stored before that consumer existed (the MQTT store keeps a
 * message only while a consumer wants it) and its core copy was left to the consumer: the
 * client never got it. So a PUBLISH read while a SUBSCRIBE is under way waits, with every
 * packet after it, unparsed, the socket paused, until the SUBSCRIBEs are done
 * (docs/decisions/mqtt-wire.md, "A PUBLISH right behind a SUBSCRIBE").
 */
export class SubscribesInFlight {
  private count = 0;

  /** `work` is a SUBSCRIBE's; `done` runs once no SUBSCRIBE is under way any more. */
  track(work: Promise<void>, done: () => void): Promise<void> {
    this.count++;
    return work.finally(() => {
      this.count--;
      if (this.count === 0) done();
    });
  }

  /** The frame (a whole packet, fixed header first) waits for the SUBSCRIBEs under way. */
  holds(frame: Uint8Array): boolean {
    return this.count > 0 && frame[0]! >> 4 === PUBLISH;
  }

  /** SUBSCRIBEs under way now: while any, a connection holding bytes keeps its socket paused. */
  get underWay(): number {
    return this.count;
  }
}
