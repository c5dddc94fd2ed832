// The package as a user gets it: `npm pack`, installed into an empty project, run with npx.
// Needs the built dist/ (npm test builds it) and the npm cache that `npm ci` filled
// (--prefer-offline: the registry is asked only for what the cache lacks).
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { accessSync, constants, cpSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { natsServerBinary } from "../helpers/natsServer.js";
import { freePort } from "../helpers/ports.js";

const root = join(import.meta.dirname, "../..");
let project: string;
let tarball: string;
let files: string[];

beforeAll(() => {
  const dir = mkdtempSync(join(tmpdir(), "mqgw-pack-"));
  // --ignore-scripts: dist/ is already built, and rebuilding it under running tests would race them.
  const packed = JSON.parse(
    execFileSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", dir], {
      cwd: root,
      encoding: "utf8",
    }),
  ) as Array<{ filename: string; files: Array<{ path: string }> }>;
  tarball = join(dir, packed[0]!.filename);
  files = packed[0]!.files.map((f) => f.path);
  project = join(dir, "project");
  execFileSync("mkdir", ["-p", project]);
  writeFileSync(
    join(project, "package.json"),
    JSON.stringify({ name: "uses-mq-gateway", version: "1.0.0", private: true }),
  );
  execFileSync("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", tarball], {
    cwd: project,
    stdio: "ignore",
    timeout: 240_000,
  });
  cpSync(join(project, "node_modules/mq-gateway/examples"), join(project, "examples"), { recursive: true });
}, 300_000);

/** PATH without any directory that holds a nats-server: a machine that has none. */
function pathWithoutNatsServer(): string {
  return (process.env.PATH ?? "")
    .split(delimiter)
    .filter((d) => {
      try {
        accessSync(join(d, "nats-server"), constants.X_OK);
        return false;
      } catch {
        return true;
      }
    })
    .join(delimiter);
}

const npx = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  spawnSync("npx", ["--no-install", ...args], {
    cwd: project,
    encoding: "utf8",
    timeout: 60_000,
    env: { ...process.env, ...env },
  });

describe("npm pack, npm install, npx", () => {
  it("ships the built code, the examples and the docs, not the sources or tests", () => {
    expect(files).toEqual(
      expect.arrayContaining([
        "bin/mq-gateway.js",
        "dist/cli/main.js",
        "examples/gateway.yaml",
        "docs/config.md",
        "README.md",
      ]),
    );
    expect(
      files.filter((f) => /^(src|test|bench)\//.test(f) || f.endsWith(".map") || f.startsWith("dist/modelcheck/")),
    ).toEqual([]);
  });

  it("npx mq-gateway check examples/gateway.yaml passes", () => {
    const result = npx(["mq-gateway", "check", "examples/gateway.yaml"]);
    expect({ status: result.status, stdout: result.stdout }).toEqual({ status: 0, stdout: "ok\n" });
  });

  it("npx mq-gateway run: the embedded nats-server from NATS_SERVER_BIN, ctl answers, Ctrl-C stops it", async () => {
    const port = async () => `127.0.0.1:${await freePort()}`;
    const args = [
      "--nats-listen",
      await port(),
      "--mqtt",
      await port(),
      "--amqp",
      await port(),
      "--http",
      await port(),
    ];
    const gw: ChildProcess = spawn("npx", ["--no-install", "mq-gateway", "run", ...args], {
      cwd: project,
      stdio: ["ignore", "ignore", "pipe"],
      env: { ...process.env, NATS_SERVER_BIN: natsServerBinary() },
      // Its own process group, stopped as a terminal's Ctrl-C stops it: npm exec does not pass signals on.
      detached: true,
    });
    let stderr = "";
    const serving = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`not serving in 60 s:\n${stderr}`)), 60_000);
      gw.stderr!.setEncoding("utf8").on("data", (c: string) => {
        stderr += c;
        if (stderr.includes('"msg":"admin connection serving the admin subjects"')) {
          clearTimeout(timer);
          resolve();
        }
      });
      gw.once("exit", (code) => reject(new Error(`exited with ${code}:\n${stderr}`)));
    });
    // "close": every process holding the stderr pipe (npm exec and the gateway under it) has ended.
    const exited = new Promise<void>((resolve) => gw.once("close", () => resolve()));
    try {
      await serving;
      const info = npx(["mq-gateway", "ctl", "info"]);
      expect(info.status, info.stderr).toBe(0);
      expect(info.stdout).toMatch(/^GATEWAY\s+VERSION/);
    } finally {
      process.kill(-gw.pid!, "SIGINT");
    }
    await exited;
    expect(stderr).toMatch(/"exit_code":0,"msg":"mq-gateway stopped"/);
  });

  it("without a nats-server anywhere: one line saying how to get one, exit 2", () => {
    const env = { ...process.env, PATH: pathWithoutNatsServer() };
    delete env.NATS_SERVER_BIN;
    const result = spawnSync(process.execPath, ["node_modules/.bin/mq-gateway", "run"], {
      cwd: project,
      encoding: "utf8",
      timeout: 30_000,
      env,
    });
    expect(result.status).toBe(2);
    expect(result.stderr.split("\n").filter((l) => l && !l.startsWith("{"))).toEqual([
      expect.stringMatching(
        /^mq-gateway: no nats-server found .*apt-get install nats-server.*NATS_SERVER_BIN.*--nats nats:\/\/HOST:4222$/,
      ),
    ]);
  });
});
