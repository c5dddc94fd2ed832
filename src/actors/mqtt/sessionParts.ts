import type { ConnectRequest, mqttConnectionMachine } from "../../machines/mqttConnection.js";
import type { NatsLease } from "../client/natsBridge.js";
import type { MachineActor } from "../machineActor.js";
import type { MqttDeps } from "./deps.js";
import { MqttClientHandle } from "./handle.js";
import { InboundPublisher } from "./inbound.js";
import { ConnectionLink, type DeniedSubjects, type LinkOwner } from "./link.js";
import { ClientSession } from "./session.js";
import type { MqttSettings } from "./settings.js";

/** What a connection holds once its CONNECT was accepted: the client's registration, its session and its publisher. */
export interface SessionParts {
  readonly handle: MqttClientHandle;
  readonly link: ConnectionLink;
  readonly session: ClientSession;
  readonly inbound: InboundPublisher;
}

/** The connection the parts serve: what they ask of it. */
export interface PartsOwner extends LinkOwner {
  readonly session: ClientSession | undefined;
}

export interface SessionPartsOptions {
  readonly cid: number;
  readonly remote: string;
  readonly version: 4 | 5;
  readonly request: ConnectRequest;
  readonly account: string;
  readonly lease: NatsLease;
  readonly settings: MqttSettings;
  readonly deps: MqttDeps;
  readonly denied: DeniedSubjects;
  /** The client's Receive Maximum (65,535 when it named none). */
  readonly clientReceiveMax: number;
  readonly actor: MachineActor<typeof mqttConnectionMachine>;
  readonly owner: PartsOwner;
}

/**
 * Registers the client (taking over an earlier connection of its id here) and makes its
 * session and its publisher. The session's machine is the connection's to start, once it
 * holds these: the machine's first step may already ask for them.
 */
export function openSessionParts(o: SessionPartsOptions): SessionParts {
  const { request, deps, actor, settings } = o;
  const handle = new MqttClientHandle(o.cid, request, o.remote, o.account, o.lease, actor, o.owner);
  deps.clients.add(handle)?.takeOver(!request.cleanStart);
  const quota = deps.quotas.forClient("mqtt", o.account);
  const link = new ConnectionLink(
    o.version,
    request.clientId,
    o.account,
    o.lease,
    settings,
    deps.metrics,
    o.denied,
    quota,
    o.owner,
  );
  const { bindings, retained, messages } = deps.session;
  // In flight to the client: its Receive Maximum, capped by mqtt.receive_maximum.
  const inFlight = Math.min(o.clientReceiveMax, settings.receiveMaximum);
  const session = new ClientSession(link, deps.session, inFlight, request.sessionExpirySec, () => {
    // Another connection of this client id wrote the session: this one lost it.
    o.owner.log.info({ client_id: request.clientId }, "session moved to a newer connection");
    actor.send({ type: "TAKEN_OVER" });
  });
  const inbound = new InboundPublisher(link, bindings, retained, session.inbound, messages);
  return { handle, link, session, inbound };
}
