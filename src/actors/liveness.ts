import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import type { Logger } from "../log.js";
import type { ClientRegistry } from "./clients.js";

/** `$MQG.alive.<id>`: how gateways sharing a sessions bucket tell the living from the dead. */
export const aliveSubject = (id: string) => `$MQG.alive.${id}`;

interface AliveRequest {
  readonly takeover?: { readonly account?: string; readonly client_id?: string };
}

/**
 * Answers `$MQG.alive.<id>` on a connection in a client account (not the admin
 * account, so it answers while the admin connection is down). A request naming a
 * client asks this gateway to let that client's session go (MQTT 5: 0x8E), in the
 * account whose connection received the ask: `scope` turns the account the body names
 * into the one the client is looked up in, or undefined when the body names an account
 * this connection is not in (a request in one account cannot reach another's clients).
 */
export function answerLiveness(
  nc: NatsConnection,
  id: string,
  clients: ClientRegistry,
  log: Logger,
  scope: (named: string | undefined) => string | undefined,
): Subscription {
  return nc.subscribe(aliveSubject(id), {
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
      if (t?.client_id !== undefined) {
        const account = scope(t.account);
        if (account === undefined) {
          log.warn({ client_id: t.client_id, account: t.account }, "takeover ask for another account ignored");
          m.respond(JSON.stringify({ id, alive: true, taken_over: 0, error: "not this connection's account" }));
          return;
        }
        const held = clients.byClient(account, t.client_id).filter((c) => c.protocol === "mqtt");
        for (const c of held) c.takeOver();
        log.info({ client_id: t.client_id, account, connections: held.length }, "session asked for by another gateway");
        m.respond(JSON.stringify({ id, alive: true, taken_over: held.length }));
        return;
      }
      m.respond(JSON.stringify({ id, alive: true }));
    },
  });
}

/** Asks the owner gateway to close a client; false when nobody answered (the owner is gone). */
export async function requestTakeover(nc: NatsConnection, owner: string, account: string, clientId: string): Promise<boolean> {
  try {
    await nc.request(aliveSubject(owner), JSON.stringify({ takeover: { account, client_id: clientId } }), { timeout: 1_000 });
    return true;
  } catch {
    return false;
  }
}
