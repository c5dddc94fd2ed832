// The built CLI as a child process: exit codes, stdout and stderr as an operator sees them.
// `npm test` builds dist/ first; when running vitest alone, run `npx tsc -p tsconfig.json` before.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOG_LEVELS } from "../../src/config/schema.js";

const root = join(import.meta.dirname, "../..");
const bin = join(root, "bin/mq-gateway.js");
let dir: string;

beforeAll(async () => {
  if (!existsSync(join(root, "dist/cli/main.js")))
    throw new Error("dist/ is not built: run npx tsc -p tsconfig.json first");
  dir = await mkdtemp(join(tmpdir(), "mqgw-cli-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function cli(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, [bin, ...args], {
    cwd: dir,
    encoding: "utf8",
    timeout: 20_000,
    env: { ...process.env, NO_COLOR: "1" },
  });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

async function file(name: string, text: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, text);
  return path;
}

const lines = (text: string) => text.split("\n").filter((l) => l !== "");

describe("check", () => {
  it("prints ok and exits 0 for a good config", async () => {
    const result = cli(
      "check",
      "--config",
      await file("good.yaml", 'id: gw-1\nmqtt:\n  routes:\n    - { subject: orders, template: "orders.{region}" }\n'),
    );
    expect(result).toEqual({ code: 0, stdout: "ok\n", stderr: "" });
  });

  it("accepts an empty file and a JSON file", async () => {
    expect(cli("check", "--config", await file("empty.yaml", "")).code).toBe(0);
    expect(cli("check", "-c", await file("c.json", '{"mqtt": {"max_packet_size": "64KiB"}}')).stdout).toBe("ok\n");
  });

  it("exits 1 with every problem on its own stderr line, each naming its path", async () => {
    const result = cli(
      "check",
      "--config",
      await file(
        "bad.yaml",
        `mqtt:
  max_packet_size: 3 parsecs
  routes:
    - { subject: orders, template: orders.region }
    - { subject: orders, template: "orders.{region}" }
  colour: red
log: { level: verbose }
`,
      ),
    );
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    const problems = lines(result.stderr);
    expect(problems.map((l) => l.slice(0, l.indexOf(": ")))).toEqual(
      expect.arrayContaining([
        "mqtt.max_packet_size",
        "mqtt.routes[0].template",
        "mqtt.routes[1].subject",
        "mqtt.colour",
        "log.level",
      ]),
    );
    expect(problems).toHaveLength(5);
    expect(problems).toContain("mqtt.routes[0].template: template has no {name} placeholder");
  });

  it("names a flag that brought a bad value", async () => {
    const result = cli("check", "--config", await file("ok.yaml", "{}"), "--mqtt", "nowhere");
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^mqtt\.listen \(from --mqtt\): "nowhere" is not HOST:PORT/m);
  });

  it("exits 1 when the file is missing or --config is not given", () => {
    const missing = cli("check", "--config", "absent.yaml");
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe("absent.yaml: cannot read the config file (no such file)\n");
    const none = cli("check");
    expect(none.code).toBe(1);
    expect(none.stderr).toBe("check needs a config file: mq-gateway check FILE (or --config FILE)\n");
  });

  it("takes the file as an argument too (mq-gateway check gateway.yaml)", async () => {
    const ok = await file("positional.yaml", "mqtt: { max_packet_size: 64KiB }\n");
    expect(cli("check", ok)).toEqual({ code: 0, stdout: "ok\n", stderr: "" });
    const bad = await file("positional-bad.yaml", "mqtt: { listen: nowhere }\n");
    expect(cli("check", bad).stderr).toMatch(/^mqtt\.listen: "nowhere" is not HOST:PORT/);
    expect(cli("check", ok, "--config", bad).code).toBe(1);
  });
});

describe("run", () => {
  it("refuses a bad config with exit 1 before starting anything, as the default command too", async () => {
    const bad = await file("bad-run.yaml", "mqtt: { listen: nowhere }\n");
    for (const args of [
      ["run", "--config", bad],
      ["--config", bad],
    ]) {
      const result = cli(...args);
      expect(result.code).toBe(1);
      expect(lines(result.stderr)).toEqual([expect.stringMatching(/^mqtt\.listen: "nowhere" is not HOST:PORT/)]);
    }
  });

  it("refuses a bad flag on the default command", () => {
    const result = cli("--log-level", "loud");
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^log\.level \(from --log-level\): expected one of trace, debug/m);
  });
});

describe("usage", () => {
  it("--version prints the package's version", () => {
    const { version } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
    expect(cli("--version")).toEqual({ code: 0, stdout: `${version}\n`, stderr: "" });
  });

  it("--help lists the commands and exits 0", () => {
    const result = cli("--help");
    expect(result.code).toBe(0);
    for (const command of ["run", "check", "generate", "statecharts"]) expect(result.stdout).toContain(command);
    expect(cli("check", "--help").stdout).toMatch(/--config <file>/);
    // The help text names the levels itself (to keep zod out of --help); it must agree with the schema.
    const runHelp = cli("run", "--help").stdout.replace(/\s+/g, " ");
    for (const level of LOG_LEVELS) expect(runHelp).toContain(level);
  });

  it("a misspelt command is named as an unknown command, with the likely one and the list (not run's 'too many arguments')", () => {
    const result = cli("chek", "x.yaml");
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr).toMatch(
      /^mq-gateway: unknown command 'chek' \(did you mean check\?\); the commands are run, check, generate, ctl, statecharts/,
    );
    expect(result.stderr).not.toContain("too many arguments");
  });

  it("an unknown command or flag exits 1 with a message on stderr", () => {
    const command = cli("frobnicate");
    expect(command.code).toBe(1);
    expect(command.stderr).toBe(
      "mq-gateway: unknown command 'frobnicate'; the commands are run, check, generate, ctl, statecharts (mq-gateway --help for usage)\n",
    );
    const flag = cli("check", "--config", "x.yaml", "--frob");
    expect(flag.code).toBe(1);
    expect(flag.stderr).toMatch(/error: unknown option '--frob'/);
  });
});

describe("statecharts", () => {
  it("writes the diagrams into --out and prints each file", () => {
    const out = join(dir, "charts");
    const result = cli("statecharts", "--out", out);
    expect(result.code).toBe(0);
    const files = lines(result.stdout);
    expect(files.filter((f) => f.endsWith(".svg")).length).toBeGreaterThan(0);
    for (const written of files) {
      expect(written.startsWith(out)).toBe(true);
      // A page with the Mermaid text, and the drawing the live page serves.
      expect(readFileSync(written, "utf8")).toContain(written.endsWith(".svg") ? '<g class="state' : "```mermaid");
    }
  });
});

describe("generate", () => {
  it("prints nats-server permissions for a config", async () => {
    const result = cli(
      "generate",
      "--format",
      "nats-server",
      "--config",
      await file("gen.yaml", "id: gw-9\ngateway_users: { PLANT_A: { user: mqg, password: x } }\n"),
    );
    expect(result.code).toBe(0);
    expect(result.stderr).toBe("");
    expect(result.stdout).toContain(`"$MQG.admin.server.gw-9.>"`);
    expect(result.stdout).toContain(`"PLANT_A" {`);
  });

  it("refuses an unknown format, a missing one, and a bad config", async () => {
    expect(cli("generate", "--format", "xml").stderr).toMatch(/Allowed choices are nats-server/);
    expect(cli("generate").code).toBe(1);
    const bad = cli(
      "generate",
      "--format",
      "nats-server",
      "--config",
      await file("gen-bad.yaml", "mqtt: { nope: 1 }\n"),
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe("mqtt.nope: unknown key\n");
  });
});
