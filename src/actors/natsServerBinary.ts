import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";

const projectRoot = fileURLToPath(new URL("../../", import.meta.url));

/**
 * Where the embedded nats-server comes from: $NATS_SERVER_BIN, then the project's own
 * tools folder (filled by scripts/nats-server.sh), then PATH.
 */
export function findNatsServer(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const candidates = [
    env.NATS_SERVER_BIN,
    join(projectRoot, ".tools/nats-server/usr/sbin/nats-server"),
    ...(env.PATH ?? "").split(delimiter).map((dir) => join(dir, "nats-server")),
  ];
  return candidates.find((path) => path && isExecutable(path));
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
