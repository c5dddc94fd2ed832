// admin-subjects.md end to end: two gateways on a nats-server with accounts (admin, two
// client accounts, system) and hand-written permissions.
import { afterAll, beforeAll, describe } from "vitest";
import { apiScenarios, lameDuckScenario, showGatewayLogsOnFailure } from "./scenarios.js";
import { HAND_WRITTEN_SERVER, startWorld, type World } from "./world.js";

describe("the admin API on two gateways", () => {
  let world: World;
  beforeAll(async () => {
    world = await startWorld(HAND_WRITTEN_SERVER);
  });
  afterAll(async () => {
    await world?.close();
  });

  showGatewayLogsOnFailure(() => world);
  apiScenarios(() => world);
  lameDuckScenario(() => world);
});
