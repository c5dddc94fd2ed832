import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * One temporary directory per test run, removed when the run ends. Every helper makes its
 * gateway's and nats-server's directories under `os.tmpdir()`, and the gateways and servers
 * they start inherit TMPDIR: a JetStream store per test adds up (a day of runs left 25 GB in
 * /tmp and filled the disk), while a test that restarts a server on the store it left
 * needs the store kept until the run is over.
 */
export default function setup(): () => void {
  const run = mkdtempSync(join(tmpdir(), "mqgw-test-run-"));
  const before = process.env.TMPDIR;
  process.env.TMPDIR = run;
  return () => {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    rmSync(run, { recursive: true, force: true });
  };
}
