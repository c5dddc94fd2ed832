// The systemd unit in docs/ as systemd itself reads it: `systemd-analyze verify` knows every
// key and checks the command exists (scripts/setup.sh --test installs it: Debian's systemd).
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const unit = join(import.meta.dirname, "../../docs/systemd/mq-gateway.service");

function verify(file: string): { status: number | null; output: string } {
  const run = spawnSync("systemd-analyze", ["verify", file], { encoding: "utf8", timeout: 30_000 });
  return { status: run.status, output: `${run.stdout}${run.stderr}`.trim() };
}

/**
 * The unit as it is on a machine where the package is installed: verify checks that
 * ExecStart's binary exists, so /opt/mq-gateway is a folder of the test's own whose
 * node_modules/node/bin/node is the Node 24 the unit asks for (the one running this test).
 */
function installedUnit(text = readFileSync(unit, "utf8")): string {
  const dir = mkdtempSync(join(tmpdir(), "mqgw-unit-"));
  const prefix = join(dir, "opt/mq-gateway");
  mkdirSync(join(prefix, "node_modules/node/bin"), { recursive: true });
  symlinkSync(process.execPath, join(prefix, "node_modules/node/bin/node"));
  const file = join(dir, "mq-gateway.service");
  writeFileSync(file, text.replaceAll("/opt/mq-gateway", prefix));
  return file;
}

describe("docs/systemd/mq-gateway.service", () => {
  it("passes systemd-analyze verify with no warning", () => {
    expect(verify(installedUnit())).toEqual({ status: 0, output: "" });
  });

  it("the check can fail: an ExecStart binary that is not there is reported", () => {
    const dir = mkdtempSync(join(tmpdir(), "mqgw-unit-"));
    copyFileSync(unit, join(dir, "mq-gateway.service"));
    expect(verify(join(dir, "mq-gateway.service")).output).toMatch(/node_modules\/node\/bin\/node/);
  });

  it("the check can fail: a misspelt key is reported", () => {
    const file = installedUnit(readFileSync(unit, "utf8").replace("TimeoutStopSec", "TimeoutStpSec"));
    expect(verify(file).output).toMatch(/Unknown key 'TimeoutStpSec'/);
  });

  it("runs the gateway with the config and data directory the deployment page names", () => {
    const text = readFileSync(unit, "utf8");
    expect(text).toMatch(
      /^ExecStart=\/opt\/mq-gateway\/node_modules\/node\/bin\/node \/opt\/mq-gateway\/node_modules\/mq-gateway\/bin\/mq-gateway\.js run --config \/etc\/mq-gateway\/gateway\.yaml --data \/var\/lib\/mq-gateway$/m,
    );
    expect(text).toMatch(/^ExecReload=\/bin\/kill -HUP \$MAINPID$/m);
  });
});
