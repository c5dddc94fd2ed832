import type { Model } from "../model.js";
import { adminConnectionModel } from "./adminConnection.js";
import { adminKickModel } from "./adminKick.js";
import { adminSessionDropModel, adminStoreRequestModel } from "./adminStore.js";
import { amqpConnectionModel } from "./amqpConnection.js";
import { amqpReceiverLinkModel, amqpSenderLinkModel } from "./amqpLink.js";
import { amqpSessionModel } from "./amqpSession.js";
import { embeddedNatsModel } from "./embeddedNats.js";
import { gatewayModel } from "./gateway.js";
import { jetStreamPullModel } from "./jetStreamPull.js";
import { lameDuckModels } from "./lameDuck.js";
import { mqttConnectionModel } from "./mqttConnection.js";
import { mqttSessionModels } from "./mqttSession.js";
import { natsConnectionModel } from "./natsConnection.js";
import { statechartsViewerModel } from "./statechartsViewer.js";

/** Every model `npm run model-check` explores; a new machine adds its model here. */
export const models: readonly Model[] = [
  gatewayModel(),
  embeddedNatsModel(),
  natsConnectionModel(),
  mqttConnectionModel(),
  ...mqttSessionModels(),
  adminConnectionModel(),
  adminKickModel(),
  adminStoreRequestModel(),
  adminSessionDropModel(),
  ...lameDuckModels(),
  amqpConnectionModel(),
  amqpSessionModel(),
  amqpSenderLinkModel(),
  amqpReceiverLinkModel(),
  jetStreamPullModel("end"),
  jetStreamPullModel("retry"),
  statechartsViewerModel(),
];
