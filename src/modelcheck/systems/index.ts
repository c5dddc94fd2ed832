import type { SystemModel } from "../system.js";
import { amqpStreamLinkModel } from "./amqpStreamLink.js";
import { mqttClientIdModel } from "./mqttClientId.js";

/** Every system `npm run model-check` explores: machines composed as the edges wire them. */
export const systems: readonly SystemModel<never>[] = [
  mqttClientIdModel(),
  mqttClientIdModel({ secondStartsClean: true }),
  amqpStreamLinkModel(),
] as unknown as SystemModel<never>[];
