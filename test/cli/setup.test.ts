// scripts/setup.sh, the first step of `npm start` and `npm test`, as a fresh clone meets it:
// a line per install step instead of minutes of silence, and nothing once all is there.
// npm here is a stand-in on PATH that makes node_modules as `npm ci` would (the real one
// needs the registry, which test/readme.test.ts uses on a real fresh clone).
import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { natsServerBinary } from "../helpers/natsServer.js";

const root = join(import.meta.dirname, "../..");

describe("scripts/setup.sh", () => {
  it("says what it installs, one line per step, and is silent when everything is there", () => {
    const clone = mkdtempSync(join(tmpdir(), "mqgw-setup-"));
    cpSync(join(root, "scripts"), join(clone, "scripts"), { recursive: true });
    cpSync(join(root, "package-lock.json"), join(clone, "package-lock.json"));
    const stub = join(clone, "stub-bin");
    mkdirSync(stub);
    writeFileSync(
      join(stub, "npm"),
      '#!/usr/bin/env bash\n[ "$1" = ci ] || exit 3\nmkdir -p node_modules && touch node_modules/.package-lock.json\necho "added 1 package"\n',
    );
    chmodSync(join(stub, "npm"), 0o755);
    const setup = () =>
      spawnSync("bash", ["scripts/setup.sh"], {
        cwd: clone,
        encoding: "utf8",
        timeout: 30_000,
        env: {
          ...process.env,
          PATH: `${stub}:${process.env.PATH}`,
          NATS_SERVER_BIN: natsServerBinary(),
          MQGW_TOOLS_DIR: process.env.MQGW_TOOLS_DIR ?? join(root, ".tools"),
        },
      });

    const first = setup();
    expect(first.status, first.stderr).toBe(0);
    expect(first.stderr.split("\n").filter((l) => l.startsWith("mq-gateway setup: "))).toEqual([
      "mq-gateway setup: installing the npm packages (npm ci; the first run of a clone, about a minute)",
      "mq-gateway setup: npm packages installed",
    ]);
    expect(existsSync(join(clone, "node_modules/.package-lock.json"))).toBe(true);

    const again = setup();
    expect(again).toMatchObject({ status: 0, stdout: "", stderr: "" });
    rmSync(clone, { recursive: true, force: true });
  });
});
