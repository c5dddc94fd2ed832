// The systemd unit in docs/ as systemd itself reads it: `systemd-analyze verify` knows every
// key and checks the command exists (scripts/setup.sh --test installs it: Debian's systemd).
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const unit = join(import.meta.dirname, "../../docs/systemd/mq-gateway.service");

function verify(file: string): { status: number | null; output: string } {
  const run = spawnSync("systemd-analyze", ["verify", file], { encoding: "utf8", timeout: 30_000 });
  return { status: run.status, output: `${run.stdout}${run.stderr}`.trim() };
}

describe("docs/systemd/mq-gateway.service", () => {
  it("passes systemd-analyze verify with no warning", () => {
    const dir = mkdtempSync(join(tmpdir(), "mqgw-unit-"));
    copyFileSync(unit, join(dir, "mq-gateway.service"));
    expect(verify(join(dir, "mq-gateway.service"))).toEqual({ status: 0, output: "" });
  });

  it("the check can fail: a misspelt key is reported", () => {
    const dir = mkdtempSync(join(tmpdir(), "mqgw-unit-"));
    const file = join(dir, "mq-gateway.service");
    writeFileSync(file, readFileSync(unit, "utf8").replace("TimeoutStopSec", "TimeoutStpSec"));
    expect(verify(file).output).toMatch(/Unknown key 'TimeoutStpSec'/);
  });

  it("runs the gateway with the config and data directory the deployment page names", () => {
    const text = readFileSync(unit, "utf8");
    expect(text).toMatch(
      /^ExecStart=\/usr\/bin\/node \S+\/bin\/mq-gateway\.js run --config \/etc\/mq-gateway\/gateway\.yaml --data \/var\/lib\/mq-gateway$/m,
    );
    expect(text).toMatch(/^ExecReload=\/bin\/kill -HUP \$MAINPID$/m);
  });
});
