import { adminConnectionMachine } from "./adminConnection.js";
import { adminKickMachine } from "./adminKick.js";
import { lameDuckMachine } from "./adminLameDuck.js";
import { adminRebalanceMachine } from "./adminRebalance.js";
import { adminSessionDropMachine } from "./adminSessionDrop.js";
import { adminStoreRequestMachine } from "./adminStoreRequest.js";
import { amqpConnectionMachine } from "./amqpConnection.js";
import { amqpReceiverLinkMachine, amqpSenderLinkMachine } from "./amqpLink.js";
import { amqpSessionMachine } from "./amqpSession.js";
import { embeddedNatsMachine } from "./embeddedNats.js";
import { gatewayMachine } from "./gateway.js";
import { jetStreamPullMachine } from "./jetStreamPull.js";
import { mqttConnectionMachine } from "./mqttConnection.js";
import { mqttSessionMachine } from "./mqttSession.js";
import { natsConnectionMachine } from "./natsConnection.js";
import { statechartsViewerMachine } from "./statechartsViewer.js";
import { storedDeliveryMachine } from "./storedDelivery.js";

/**
 * Every machine of the gateway, in one place: statecharts, metrics and the live page
 * read this list. A new actor type adds its machine here and nothing else changes.
 */
export const machines = [
  gatewayMachine,
  embeddedNatsMachine,
  natsConnectionMachine,
  mqttConnectionMachine,
  mqttSessionMachine,
  adminConnectionMachine,
  adminKickMachine,
  adminRebalanceMachine,
  adminStoreRequestMachine,
  adminSessionDropMachine,
  lameDuckMachine,
  amqpConnectionMachine,
  amqpSessionMachine,
  amqpSenderLinkMachine,
  amqpReceiverLinkMachine,
  jetStreamPullMachine,
  storedDeliveryMachine,
  statechartsViewerMachine,
] as const;
