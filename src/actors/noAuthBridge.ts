import { type Credentials, NatsBridge, type NatsLease } from "./client/natsBridge.js";

/**
 * The bridge in front of the embedded nats-server, which authenticates nobody: its client
 * account's only user is the no-auth user, so a username and password would be refused
 * there rather than checked. Every client rides that user, as on a nats-server without
 * users (and as Mosquitto's local-only mode takes any login); the username still picks
 * an account through `routing`. docs/decisions/embedded-nats.md.
 */
export class NoAuthBridge extends NatsBridge {
  override acquire(_credentials: Credentials): Promise<NatsLease> {
    return super.acquire({});
  }
}
