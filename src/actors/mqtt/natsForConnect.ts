import type { ConnectRequest, mqttConnectionMachine } from "../../machines/mqttConnection.js";
import { ConnackV4, Reason } from "../../protocol/mqttReasons.js";
import { acquireNatsAccess, acquireNatsAccessNow } from "../client/natsAccess.js";
import type { LeaseListener, NatsLease } from "../client/natsBridge.js";
import type { MachineActor } from "../machineActor.js";
import { credentialsOf } from "./connect.js";
import type { MqttDeps } from "./deps.js";

/** The connection whose CONNECT gets NATS: it keeps the lease (and releases it at its end) and hears its news. */
export interface ConnectEdge extends LeaseListener {
  readonly remote: string;
  keepLease(lease: NatsLease): void;
}

/**
 * What `acquireNatsForConnect` would tell, when nothing needs waiting for: the connection of
 * the client's credentials is up, its account known, the client not banned, the account
 * under its limit. The CONNECT event carries it and the machine goes on without asking
 * (`acquire_nats`); undefined: the machine asks, and hears why when refused.
 */
export function natsForConnectNow(
  deps: MqttDeps,
  request: ConnectRequest,
  edge: ConnectEdge,
): { readonly account: string; readonly natsUp: boolean } | undefined {
  if (deps.bans?.refusal({ clientId: request.clientId, username: request.username, remote: edge.remote }))
    return undefined;
  const access = acquireNatsAccessNow(deps, credentialsOf(request), request.username);
  if (!access) return undefined;
  edge.keepLease(access.lease);
  access.lease.listen(edge);
  return { account: access.account, natsUp: access.lease.connected() };
}

/**
 * The client's own NATS connection, account and per-account limit (client/natsAccess.ts),
 * told to the connection's machine as NATS_ACQUIRED or NATS_REFUSED. A lease made is
 * handed to the edge to keep (and listened to by it) before the machine hears of it: the
 * session it opens at once runs on it, and the connection releases it when it ends.
 */
export async function acquireNatsForConnect(
  deps: MqttDeps,
  request: ConnectRequest,
  actor: MachineActor<typeof mqttConnectionMachine>,
  edge: ConnectEdge & { readonly log: { warn(o: object, msg: string): void } },
): Promise<void> {
  const banned = deps.bans?.refusal({ clientId: request.clientId, username: request.username, remote: edge.remote });
  if (banned) {
    deps.metrics.refused("mqtt", "banned");
    // MQTT 5 says Banned (0x8A); 3.1.1 has no such code: Not authorized (0x05).
    const codes = { v5: Reason.banned, v4: ConnackV4.notAuthorized };
    return actor.send({ type: "NATS_REFUSED", auth: true, reason: banned, codes });
  }
  const access = await acquireNatsAccess(
    deps,
    "mqtt",
    credentialsOf(request),
    request.username,
    () => actor.getSnapshot().status === "active",
  );
  if (access.kind === "gone") return;
  if (access.kind === "refused") return actor.send({ type: "NATS_REFUSED", auth: access.auth, reason: access.reason });
  const lease = access.lease;
  edge.keepLease(lease);
  lease.listen(edge);
  if (access.kind === "no account") {
    edge.log.warn({ err: access.reason }, "account could not be told");
    return actor.send({ type: "NATS_REFUSED", auth: false, reason: `account: ${access.reason}` });
  }
  if (access.kind === "over limit")
    return actor.send({
      type: "NATS_REFUSED",
      auth: false,
      reason: `account ${access.account} has ${access.limit} connections on this gateway`,
      codes: { v5: Reason.quotaExceeded, v4: ConnackV4.serverUnavailable },
    });
  // Up or down as it is now: a change while the account was looked up is not missed.
  actor.send({ type: "NATS_ACQUIRED", account: access.account, natsUp: lease.connected() });
}
