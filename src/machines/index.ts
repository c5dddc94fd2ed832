import { embeddedNatsMachine } from "./embeddedNats.js";
import { gatewayMachine } from "./gateway.js";
import { mqttConnectionMachine } from "./mqttConnection.js";
import { natsConnectionMachine } from "./natsConnection.js";

/**
 * Every machine of the gateway, in one place: statecharts, metrics and the live page
 * read this list. A new actor type adds its machine here and nothing else changes.
 */
export const machines = [gatewayMachine, embeddedNatsMachine, natsConnectionMachine, mqttConnectionMachine] as const;
