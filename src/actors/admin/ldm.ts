import type { MachineActor } from "../machineActor.js";
import type { gatewayMachine } from "../../machines/gateway.js";

export type LdmReply = { started: true } | { started: false; reason: string };

/** The `ldm` op: what SIGUSR2 does, refused when the gateway is past serving. */
export function startLameDuck(gateway: MachineActor<typeof gatewayMachine>): LdmReply {
  const state = gateway.getSnapshot().value;
  if (state === "lameDuck") return { started: false, reason: "lame duck mode is already running" };
  if (state !== "serving") return { started: false, reason: `the gateway is ${state}` };
  gateway.send({ type: "LAME_DUCK" });
  return { started: true };
}
