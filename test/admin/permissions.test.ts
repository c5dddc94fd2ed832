// `mq-gateway generate --format nats-server`, loaded into a real nats-server (with the
// system account and the client users added), passes the same admin tests as the
// hand-written permissions, and keeps client users out of $MQG.>.
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { apiScenarios, lameDuckScenario, showGatewayLogsOnFailure } from "./scenarios.js";
import { CLIENT_USERS, FLEET_CONFIG, SECRETS, startWorld, type World, withSystemAccount } from "./world.js";

const run = promisify(execFile);
const bin = join(import.meta.dirname, "../../bin/mq-gateway.js");
const PLACEHOLDER = `# { user: "sensor-7", password: "..." }`;

/** The generated text with each client account's users written where it says they go. */
async function generatedServerConfig(): Promise<string> {
  const file = join(mkdtempSync(join(tmpdir(), "mqgw-perm-")), "fleet.yaml");
  writeFileSync(file, stringify(FLEET_CONFIG));
  const { stdout } = await run(process.execPath, [bin, "generate", "--format", "nats-server", "--config", file], {
    env: { ...process.env, ...SECRETS },
  });
  const [before, plantB] = stdout.split(`"PLANT_B" {`);
  if (plantB === undefined || !before?.includes(`"PLANT_A" {`))
    throw new Error(`no PLANT_A and PLANT_B blocks in:\n${stdout}`);
  return withSystemAccount(
    `${before.replace(PLACEHOLDER, CLIENT_USERS.PLANT_A)}"PLANT_B" {${plantB.replace(PLACEHOLDER, CLIENT_USERS.PLANT_B)}`,
  );
}

describe("the admin API on the generated nats-server permissions", () => {
  let world: World;
  beforeAll(async () => {
    const text = await generatedServerConfig();
    // nats-server reads each password variable from its environment.
    for (const variable of text.matchAll(/^# {3}\$([A-Za-z_][A-Za-z0-9_]*)/gm)) {
      const key = variable[1] as string;
      process.env[key] = key in SECRETS ? SECRETS[key as keyof typeof SECRETS] : `pw-${key}`;
    }
    world = await startWorld(text);
  });
  afterAll(async () => {
    await world?.close();
  });

  it("keeps client NATS users out of $MQG.>", async () => {
    const client = await world.as("sensor-a", "sensor-a-pw");
    await expect(client.request("$MQG.admin.ping.info", "", { timeout: 2_000 })).rejects.toThrow(
      /permissions violation/i,
    );
    const sub = client.subscribe("$MQG.>");
    await expect(
      (async () => {
        for await (const _ of sub) return "message";
        return "closed";
      })(),
    ).rejects.toThrow(/permissions violation/i);
  });

  showGatewayLogsOnFailure(() => world);
  apiScenarios(() => world);
  lameDuckScenario(() => world);
});
