import type { Logger } from "../log.js";
import { claimsOf } from "./claimAnnouncer.js";
import type { NatsSeam } from "./client/natsSeam.js";
import type { ClientRegistry } from "./clients.js";
import type { SessionDirectory } from "./mqtt/sessionDirectory.js";

/** `$MQG.alive.<id>`: how gateways sharing a sessions bucket tell the living from the dead. */
export const aliveSubject = (id: string) => `$MQG.alive.${id}`;
/** `$MQG.claim.<id>`: the gateway `<id>` tells the others a client id just connected there. */
export const claimSubject = (id: string) => `$MQG.claim.${id}`;

/** How long an owner waits for the session it lets go to be saved before it answers anyway. */
const RELEASE_WAIT_MS = 4_000;
/** Alive or not: a gateway that does not answer this fast is taken for dead. */
const PING_TIMEOUT_MS = 1_000;
/** The asker waits a little longer than the owner's own bound on the release. */
const TAKEOVER_TIMEOUT_MS = RELEASE_WAIT_MS + 2_000;

interface AliveRequest {
  /** `clean_start`: whether the connection that asks resumes the session or starts clean (its will depends on it). */
  readonly takeover?: { readonly account?: string; readonly client_id?: string; readonly clean_start?: boolean };
}

export interface LivenessOptions {
  readonly nats: NatsSeam;
  readonly id: string;
  readonly clients: ClientRegistry;
  readonly directory: SessionDirectory;
  readonly log: Logger;
  /** The account whose connection this is; undefined in the single-account case (the asker names it). */
  readonly account?: string | undefined;
}

/**
 * Answers `$MQG.alive.<id>` and hears `$MQG.claim.*` on a connection in a client account
 * (not the admin account, so it works while the admin connection is down). An ask that
 * names a client closes that client's connection here (MQTT 5: 0x8E) and is answered once
 * its session is saved, so the asker reads what it left. A claim from another gateway
 * closes a connection of that client id here that is older than the claiming one: one
 * client id is one live connection across the gateways, whatever its session expiry.
 */
export function answerLiveness(options: LivenessOptions): { unsubscribe(): void } {
  const { nats, id, clients, directory, log } = options;
  const accountOf = (named: string | undefined) => options.account ?? named ?? "";
  const alive = nats.subscribe(aliveSubject(id), {
    callback: (e, m) => {
      // A refused subscription reports its error here, with no message; the bridge logs it.
      if (e) return;
      let request: AliveRequest = {};
      try {
        request = m.data.byteLength ? (m.json() as AliveRequest) : {};
      } catch {
        m.respond(JSON.stringify({ id, alive: true, error: "request is not JSON" }));
        return;
      }
      const t = request.takeover;
      if (t?.client_id === undefined) {
        m.respond(JSON.stringify({ id, alive: true }));
        return;
      }
      const account = accountOf(t.account);
      const clientId = t.client_id;
      const held = clients.byClient(account, clientId).filter((c) => c.protocol === "mqtt");
      for (const c of held) c.takeOver(resumedBy(t.clean_start));
      directory.parked.drop(account, clientId);
      const asked = { client_id: clientId, account, connections: held.length };
      // A session whose connection had ended here moving on (its parked readers let go) is routine: no info line each.
      if (held.length > 0) log.info(asked, "session asked for by another gateway");
      else log.debug(asked, "session asked for by another gateway");
      const answer = () => m.respond(JSON.stringify({ id, alive: true, taken_over: held.length }));
      let timer: ReturnType<typeof setTimeout> | undefined;
      void Promise.race([
        directory.whenReleased(account, clientId),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, RELEASE_WAIT_MS))),
      ]).then(() => {
        clearTimeout(timer);
        // Parked since the drop above: a connection taken over just now ended after it, and
        // its readers parked once its record was written. The asker takes them over next.
        directory.parked.drop(account, clientId);
        answer();
      });
    },
  });
  const claims = nats.subscribe(claimSubject("*"), {
    callback: (e, m) => {
      if (e || m.subject === claimSubject(id)) return;
      let message: unknown;
      try {
        message = m.json();
      } catch {
        return;
      }
      const batch = claimsOf(message);
      const account = accountOf(batch.account);
      for (const claim of batch.claims) {
        // Parked here: the client is the other gateway's to resume now (it takes the consumers over).
        directory.parked.drop(account, claim.client_id);
        for (const c of clients.byClient(account, claim.client_id)) {
          if (c.protocol === "mqtt" && c.since.getTime() <= claim.at) {
            log.info(
              { client_id: claim.client_id, account, by: m.subject.slice(claimSubject("").length) },
              "client id connected on another gateway",
            );
            c.takeOver(resumedBy(claim.clean_start));
          }
        }
      }
    },
  });
  return {
    unsubscribe: () => {
      alive.unsubscribe();
      claims.unsubscribe();
    },
  };
}

/** A taken-over connection's will depends on whether the new one resumes its session (mqttConnection.ts). */
function resumedBy(cleanStart: boolean | undefined): boolean | undefined {
  return cleanStart === undefined ? undefined : !cleanStart;
}

/** Sends a message of claims (claimAnnouncer.ts) to the other gateways of the account. */
export function announceClaims(nats: NatsSeam, id: string, payload: string): void {
  try {
    nats.publish(claimSubject(id), payload);
  } catch {
    // The gateway's connection is closing: the session's store check still applies.
  }
}

/**
 * Asks the owner gateway to close a client and let its session go; resolves once it has
 * (true), or false when the owner did not answer at all (it is gone). An owner that is
 * alive but slow to release is let be after TAKEOVER_TIMEOUT_MS: the conditional writes of
 * the sessions bucket keep its late writes from overwriting the new connection's.
 */
export async function requestTakeover(
  nats: NatsSeam,
  owner: string,
  account: string,
  clientId: string,
  cleanStart: boolean,
): Promise<boolean> {
  try {
    await nats.request(aliveSubject(owner), "", PING_TIMEOUT_MS);
  } catch {
    return false;
  }
  try {
    await nats.request(
      aliveSubject(owner),
      JSON.stringify({ takeover: { account, client_id: clientId, clean_start: cleanStart } }),
      TAKEOVER_TIMEOUT_MS,
    );
  } catch {
    // Alive a moment ago: treat it as released.
  }
  return true;
}
