import { randomBytes } from "node:crypto";
import type { IConnectPacket, Packet } from "mqtt-packet";
import type { ConnectRequest, WillMessage } from "../../machines/mqttConnection.js";
import { ConnackV4, Reason } from "../../protocol/mqttReasons.js";
import { bridgeCredentialsOf, type Credentials } from "../natsBridge.js";
import { tooLong } from "../../protocol/natsLimits.js";
import { loginCredentials } from "../../protocol/natsLogin.js";
import type { MqttSettings } from "./settings.js";

/** What a CONNECT asks for, or the CONNACK that refuses it (then the connection closes). */
export type ConnectOutcome =
  | {
      readonly ok: true;
      readonly request: ConnectRequest;
      readonly assignedId: string | undefined;
      readonly clientMaxPacket: number;
      readonly clientReceiveMax: number;
    }
  | { readonly ok: false; readonly connack: Packet; readonly reasonCode: number; readonly reason: string };

export function readConnect(p: IConnectPacket, settings: MqttSettings): ConnectOutcome {
  if (p.protocolVersion !== 4 && p.protocolVersion !== 5) {
    // [MQTT-3.1.2-2] answer 0x01 and close: MQIsdp (3.1) clients learn they must upgrade.
    return {
      ok: false,
      connack: { cmd: "connack", returnCode: ConnackV4.unacceptableProtocolVersion, sessionPresent: false },
      reasonCode: Reason.unsupportedProtocolVersion,
      reason: `protocol level ${p.protocolVersion} is not supported`,
    };
  }
  const version = p.protocolVersion;
  let clientId = p.clientId ?? "";
  let assignedId: string | undefined;
  if (clientId === "") {
    if (version === 4 && !p.clean) {
      // [MQTT-3.1.3-8] a persistent session needs a client id.
      return {
        ok: false,
        connack: { cmd: "connack", returnCode: ConnackV4.identifierRejected, sessionPresent: false },
        reasonCode: Reason.clientIdNotValid,
        reason: "empty client id with clean session 0",
      };
    }
    clientId = `mqgw-${randomBytes(8).toString("hex")}`;
    assignedId = clientId;
  }
  if (tooLong(clientId, undefined, settings.maxClientIdBytes)) {
    // Its session key would not fit a NATS protocol line: nats-server would close the gateway user's connection.
    return {
      ok: false,
      connack: version === 5
        ? { cmd: "connack", reasonCode: Reason.clientIdNotValid, sessionPresent: false, properties: { reasonString: `client id longer than ${settings.maxClientIdBytes} bytes` } }
        : { cmd: "connack", returnCode: ConnackV4.identifierRejected, sessionPresent: false },
      reasonCode: Reason.clientIdNotValid,
      reason: `client id longer than ${settings.maxClientIdBytes} bytes (nats.max_control_line)`,
    } as ConnectOutcome;
  }
  const sessionExpirySec =
    version === 5
      ? Math.min(p.properties?.sessionExpiryInterval ?? 0, settings.sessionExpiryMaxSec)
      : p.clean
        ? 0
        : settings.sessionExpiryMaxSec;
  const request: ConnectRequest = {
    protocolVersion: version,
    clientId,
    keepaliveSec: p.keepalive ?? 0,
    cleanStart: p.clean !== false,
    sessionExpirySec,
    ...(p.username !== undefined ? { username: p.username } : {}),
    ...(p.password !== undefined ? { password: p.password.toString("utf8") } : {}),
    ...(p.will ? { will: willOf(p.will, version) } : {}),
  };
  return {
    ok: true,
    request,
    assignedId,
    clientMaxPacket:
      version === 5 ? (p.properties?.maximumPacketSize ?? Number.POSITIVE_INFINITY) : Number.POSITIVE_INFINITY,
    clientReceiveMax: version === 5 ? (p.properties?.receiveMaximum ?? 65535) : 65535,
  };
}

function willOf(w: NonNullable<IConnectPacket["will"]>, version: 4 | 5): WillMessage {
  const { willDelayInterval, ...properties } = w.properties ?? {};
  return {
    topic: w.topic,
    payload: typeof w.payload === "string" ? Buffer.from(w.payload) : w.payload,
    qos: w.qos ?? 0,
    retain: w.retain === true,
    delayMs: version === 5 ? (willDelayInterval ?? 0) * 1000 : 0,
    ...(version === 5 ? { properties } : {}),
  };
}

/** The CONNACK: 3.1.1 a return code; v5 a reason code and, when accepted, the server's limits. */
export function connackPacket(
  version: 4 | 5,
  returnCode: number,
  sessionPresent: boolean,
  settings: MqttSettings,
  keepaliveSec: number,
  assignedId: string | undefined,
): Packet {
  if (version !== 5) return { cmd: "connack", returnCode, sessionPresent };
  const max = settings.maxKeepaliveSec;
  const serverKeepAlive = max > 0 && (keepaliveSec === 0 || keepaliveSec > max) ? max : undefined;
  return {
    cmd: "connack",
    reasonCode: returnCode,
    sessionPresent,
    properties:
      returnCode === 0
        ? {
            receiveMaximum: settings.receiveMaximum,
            maximumPacketSize: settings.maxPacketSize,
            topicAliasMaximum: settings.topicAliasMaximum,
            retainAvailable: true,
            wildcardSubscriptionAvailable: true,
            subscriptionIdentifiersAvailable: true,
            sharedSubscriptionAvailable: true,
            ...(assignedId ? { assignedClientIdentifier: assignedId } : {}),
            ...(serverKeepAlive !== undefined ? { serverKeepAlive } : {}),
          }
        : {},
  } as Packet;
}

/** CONNECT username/password become the client's own NATS login; a password alone is a token (CONTRACT), a user JWT a JWT. */
export function credentialsOf(request: ConnectRequest): Credentials {
  return bridgeCredentialsOf(loginCredentials(request.username, request.password));
}

