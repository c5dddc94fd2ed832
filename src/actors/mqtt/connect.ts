import { randomBytes } from "node:crypto";
import type { IAuthPacket, IConnectPacket, Packet } from "mqtt-packet";
import type { ConnectRequest, WillMessage } from "../../machines/mqttConnection.js";
import type { HomeQuestion } from "../../protocol/homeWorker.js";
import { ConnackV4, Reason } from "../../protocol/mqttReasons.js";
import { tooLong } from "../../protocol/natsLimits.js";
import { loginCredentials } from "../../protocol/natsLogin.js";
import { bridgeCredentialsOf, type Credentials } from "../client/natsBridge.js";
import type { MqttSettings } from "./settings.js";

/** What a CONNECT asks for, or the CONNACK that refuses it (then the connection closes). */
export type ConnectOutcome =
  | {
      readonly ok: true;
      readonly request: ConnectRequest;
      readonly assignedId: string | undefined;
      readonly clientMaxPacket: number;
      readonly clientReceiveMax: number;
      /** The aliases the client takes from the gateway (0: none). */
      readonly clientTopicAliasMax: number;
    }
  | {
      readonly ok: false;
      readonly connack: Packet;
      readonly reasonCode: number;
      readonly reason: string;
      /** The version the CONNACK is written in, and the client's Maximum Packet Size it must fit. */
      readonly version: 4 | 5;
      readonly clientMaxPacket: number;
    };

export function readConnect(p: IConnectPacket, settings: MqttSettings): ConnectOutcome {
  if (p.protocolVersion !== 4 && p.protocolVersion !== 5) {
    // [MQTT-3.1.2-2] answer 0x01 and close: MQIsdp (3.1) clients learn they must upgrade.
    return {
      ok: false,
      connack: { cmd: "connack", returnCode: ConnackV4.unacceptableProtocolVersion, sessionPresent: false },
      reasonCode: Reason.unsupportedProtocolVersion,
      reason: `protocol level ${p.protocolVersion} is not supported`,
      version: 4,
      clientMaxPacket: Number.POSITIVE_INFINITY,
    };
  }
  const version = p.protocolVersion;
  const clientMaxPacket =
    version === 5 ? (p.properties?.maximumPacketSize ?? Number.POSITIVE_INFINITY) : Number.POSITIVE_INFINITY;
  const authMethod = version === 5 ? p.properties?.authenticationMethod : undefined;
  if (authMethod !== undefined) {
    // MQTT 5 section 4.12: the gateway supports no enhanced authentication method; NATS
    // decides with the username and password: CONNACK 0x8C Bad authentication method.
    const reason = `authentication method ${JSON.stringify(authMethod)} is not supported: use username and password`;
    return {
      ok: false,
      connack: {
        cmd: "connack",
        reasonCode: Reason.badAuthenticationMethod,
        sessionPresent: false,
        properties: { reasonString: reason },
      } as Packet,
      reasonCode: Reason.badAuthenticationMethod,
      reason,
      version: 5,
      clientMaxPacket,
    };
  }
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
        version: 4,
        clientMaxPacket,
      };
    }
    clientId = `mqgw-${randomBytes(8).toString("hex")}`;
    assignedId = clientId;
  }
  if (tooLong(clientId, undefined, settings.maxClientIdBytes)) {
    // Its session key would not fit a NATS protocol line: nats-server would close the gateway user's connection.
    return {
      ok: false,
      connack: (version === 5
        ? {
            cmd: "connack",
            reasonCode: Reason.clientIdNotValid,
            sessionPresent: false,
            properties: { reasonString: `client id longer than ${settings.maxClientIdBytes} bytes` },
          }
        : { cmd: "connack", returnCode: ConnackV4.identifierRejected, sessionPresent: false }) as Packet,
      reasonCode: Reason.clientIdNotValid,
      reason: `client id longer than ${settings.maxClientIdBytes} bytes (nats.max_control_line)`,
      version,
      clientMaxPacket,
    };
  }
  const unsupported = p.will ? willUnsupported(p.will, settings) : undefined;
  if (unsupported) {
    // [MQTT-3.2.2-12, -13]: CONNACK 0x9B / 0x9A and close; 3.1.1 has no such code (as mosquitto's max_qos: refused).
    return {
      ok: false,
      connack: (version === 5
        ? {
            cmd: "connack",
            reasonCode: unsupported.reasonCode,
            sessionPresent: false,
            properties: { reasonString: unsupported.reason },
          }
        : { cmd: "connack", returnCode: ConnackV4.notAuthorized, sessionPresent: false }) as Packet,
      ...unsupported,
      version,
      clientMaxPacket,
    };
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
    clientMaxPacket,
    clientReceiveMax: version === 5 ? (p.properties?.receiveMaximum ?? 65535) : 65535,
    clientTopicAliasMax: version === 5 ? (p.properties?.topicAliasMaximum ?? 0) : 0,
  };
}

/**
 * The answer to an AUTH packet (MQTT 5 section 4.12): DISCONNECT 0x82 Protocol Error. The
 * gateway accepts no CONNECT with an Authentication Method (CONNACK 0x8C above), so no
 * client has an exchange to continue or restart, and a client whose CONNECT named no
 * method must not send AUTH [MQTT-4.12.0-7]. 0x8C Bad authentication method is a CONNACK
 * code only, not one a DISCONNECT may carry; the reason string says what went wrong.
 */
export function authAnswer(p: IAuthPacket): { reasonCode: number; reason: string } {
  const method = p.properties?.authenticationMethod;
  return {
    reasonCode: Reason.protocolError,
    reason:
      method !== undefined
        ? `AUTH with authentication method ${JSON.stringify(method)}: the gateway supports no enhanced authentication (use username and password)`
        : "AUTH on a connection whose CONNECT named no Authentication Method [MQTT-4.12.0-7]",
  };
}

/** A will the gateway may not publish as asked (mqtt.maximum_qos, mqtt.retain_available). */
function willUnsupported(
  w: NonNullable<IConnectPacket["will"]>,
  settings: MqttSettings,
): { reasonCode: number; reason: string } | undefined {
  if ((w.qos ?? 0) > settings.maximumQos)
    return { reasonCode: Reason.qosNotSupported, reason: `will QoS ${w.qos} above Maximum QoS ${settings.maximumQos}` };
  if (w.retain && !settings.retainAvailable)
    return { reasonCode: Reason.retainNotSupported, reason: "retained wills are not available" };
  return undefined;
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
            // Absent means 2 [MQTT-3.2.2-9].
            ...(settings.maximumQos < 2 ? { maximumQoS: settings.maximumQos } : {}),
            retainAvailable: settings.retainAvailable,
            wildcardSubscriptionAvailable: settings.wildcardSubscriptionAvailable,
            subscriptionIdentifiersAvailable: true,
            sharedSubscriptionAvailable: settings.sharedSubscriptionAvailable,
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

/** What decides a CONNECT's home worker under `run --workers` (protocol/homeWorker.ts), read before anything else of it. */
export const homeQuestion = (p: IConnectPacket): HomeQuestion => ({
  clientId: p.clientId ?? "",
  cleanStart: p.clean !== false,
  sessionExpirySec: p.protocolVersion === 5 ? (p.properties?.sessionExpiryInterval ?? 0) : 0,
});
