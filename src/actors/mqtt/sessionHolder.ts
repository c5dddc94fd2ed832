import type { StoredSession } from "./sessionStore.js";
import { PARK_MS } from "./storedDeliveryOptions.js";

/** Clocks of gateways on different hosts differ: a detach this much older may still have readers parked. */
const CLOCK_SLACK_MS = 5_000;

/**
 * The other gateway a connection must ask before it reads the session (mqttSession machine,
 * `takingOver`): the one holding the client's connection, or the one where it ended moments
 * ago with stored subscriptions, whose readers may still be parked there
 * (docs/decisions/session-parking.md). Parked readers keep their pulls waiting until that
 * gateway hears this one's claim (batched, up to 50 ms later): meanwhile a pull of theirs
 * without a pin id can be pinned by what this connection's RESET hands back, or by the next
 * message, and hold it for nobody. Asked, that gateway drops them before it answers, so the
 * takeover that follows is the consumer's only reader.
 */
export function holderElsewhere(session: StoredSession | undefined, self: string, now: number): string | undefined {
  const owner = session?.owner;
  if (session === undefined || owner === undefined || owner === self) return undefined;
  if (session.connected === true) return owner;
  // An older gateway's record says nothing of when it was written: it parked nothing either.
  if (session.expirySec === undefined) return undefined;
  if (!session.subscriptions.some((s) => s.consumer !== undefined)) return undefined;
  const detachedAt = session.expiresAt - session.expirySec * 1_000;
  return now < detachedAt + PARK_MS + CLOCK_SLACK_MS ? owner : undefined;
}
