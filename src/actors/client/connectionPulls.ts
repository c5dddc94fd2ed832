/** What a pull engine is told of its connection (client/jetStreamPull.ts). */
export interface ConnectionFollower {
  /** The connection went away: the pulls made may be gone with the server that held them. */
  connectionLost(): void;
  /** It is back (the same server restarted, or another): what was forgotten is asked again now. */
  connectionBack(): void;
}

/**
 * The pull engines of one NATS connection, told when it goes and comes back. Without it a
 * pull a restarted nats-server forgot was noticed only when its own timer ran out (its
 * expiry and a grace): an MQTT stored subscription got nothing published meanwhile until
 * then, and pulls could not be long (docs/decisions/session-consumers.md). One watch per
 * connection, not one per engine: a gateway holds two engines per persistent session.
 */
export class ConnectionPulls {
  private readonly followers = new Set<ConnectionFollower>();

  /** `watch` is the connection's status (NatsSeam.watch), asked once. */
  constructor(watch: (w: { disconnected(): void; reconnected(): void }) => void) {
    watch({
      disconnected: () => {
        for (const f of this.followers) f.connectionLost();
      },
      reconnected: () => {
        for (const f of this.followers) f.connectionBack();
      },
    });
  }

  /**
   * Follows the connection from now on. One made while it is away pulls at once, into a
   * queue nats.js drops when it dials again: it asks again when the connection is back, as
   * every engine does (JetStreamPull.connectionBack).
   */
  add(f: ConnectionFollower): void {
    this.followers.add(f);
  }

  delete(f: ConnectionFollower): void {
    this.followers.delete(f);
  }
}
