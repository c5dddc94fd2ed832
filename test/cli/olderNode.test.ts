// `node bin/mq-gateway.js` started on a Node older than 22 (Debian 12 has 18, Debian 13
// has 20) runs itself again on the supported Node scripts/node.sh prints, and passes its
// signals on. The older Node is this one told to say it is 20.0.0 (a module run before
// the bin), so the test needs no second Node on the machine.
// `npm test` builds dist/ first; when running vitest alone, run `npx tsc -p tsconfig.json` before.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { natsServerBinary } from "../helpers/natsServer.js";
import { eventually } from "../helpers/poll.js";
import { freePort } from "../helpers/ports.js";

const root = join(import.meta.dirname, "../..");
const bin = join(root, "bin/mq-gateway.js");
const pretend20 = `data:text/javascript,Object.defineProperty(process.versions,"node",{value:"20.0.0"})`;
const env = {
  ...process.env,
  // scripts/node.sh takes the PATH's node when it is 22 or newer: the one running this test.
  PATH: `${dirname(process.execPath)}:${process.env.PATH}`,
  MQGW_TOOLS_DIR: process.env.MQGW_TOOLS_DIR ?? join(root, ".tools"),
  NATS_SERVER_BIN: natsServerBinary(),
  NO_COLOR: "1",
};

describe("bin/mq-gateway.js on a Node older than 22", () => {
  it("answers as usual, once (--version, an unknown command's exit code)", () => {
    const version = spawnSync(process.execPath, ["--import", pretend20, bin, "--version"], {
      env,
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(version.stdout).toBe(
      `${(JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version}\n`,
    );
    expect(version.status).toBe(0);
    const unknown = spawnSync(process.execPath, ["--import", pretend20, bin, "chek"], {
      env,
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toMatch(/^mq-gateway: unknown command 'chek'/);
  });

  it("runs the gateway in a process of the supported Node, and SIGTERM to it stops the gateway cleanly (exit 0)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mqgw-oldnode-"));
    const args = [
      "--import",
      pretend20,
      bin,
      "run",
      "--data",
      join(dir, "data"),
      "--nats-listen",
      `127.0.0.1:${await freePort()}`,
    ];
    for (const flag of ["--mqtt", "--amqp", "--http"]) args.push(flag, "127.0.0.1:0");
    const proc = spawn(process.execPath, args, { env, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    proc.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
    const exited = new Promise<number | null>((resolve) => proc.once("exit", resolve));
    try {
      const serving = await eventually(
        () => stderr.split("\n").find((l) => l.includes('"msg":"mq-gateway serving"')),
        30_000,
        `the gateway serving:\n${stderr}`,
      );
      // The gateway logs its own pid: another process than the one started on the "older" Node.
      expect((JSON.parse(serving) as { pid: number }).pid).not.toBe(proc.pid);
      proc.kill("SIGTERM");
      expect(await exited).toBe(0);
      expect(stderr).toMatch(/"exit_code":0,"msg":"mq-gateway stopped"/);
    } finally {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
    }
  });
});
