#!/usr/bin/env node
// The mq-gateway command. A package from npm ships dist/ built; a git clone builds it on
// `npm install` (the prepare script) or, failing that, here on the first run.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const built = new URL("../dist/cli/main.js", import.meta.url);

// In a clone, on a Node older than the supported 22 (Debian 12 has 18, Debian 13 has 20):
// run again on the Node that scripts/node.sh finds, or fetches once into .tools/
// (docs/decisions/node.md), so `node bin/mq-gateway.js ...` runs on a supported Node.
const supported = olderNodeReplacement();
if (supported) runOn(supported);
else await runHere();

function olderNodeReplacement() {
  const script = fileURLToPath(new URL("../scripts/node.sh", import.meta.url));
  if (Number(process.versions.node.split(".")[0]) >= 22 || process.env.MQGW_REEXEC || !existsSync(script)) return undefined;
  try {
    return execFileSync("bash", [script], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim() || undefined;
  } catch {
    console.error(`mq-gateway: Node ${process.version} is older than 22 and scripts/node.sh found no other: running on it`);
    return undefined;
  }
}

function runOn(node) {
  const child = spawn(node, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: "inherit",
    env: { ...process.env, MQGW_REEXEC: "1" },
  });
  // The gateway's signals (stop, reload, lame duck) reach it through this process too.
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP", "SIGUSR2"]) process.on(signal, () => child.kill(signal));
  child.on("exit", (code, signal) => {
    process.exitCode = code ?? (signal ? 1 : 0);
  });
}

async function runHere() {
  if (!existsSync(built)) {
    const tsc = fileURLToPath(new URL("../node_modules/typescript/bin/tsc", import.meta.url));
    if (!existsSync(tsc)) {
      console.error(`mq-gateway is not built yet: run npm install in ${root} (it installs the dependencies and builds dist/)`);
      process.exit(1);
    }
    console.error("mq-gateway: building dist/ (first run of a clone)");
    const build = spawnSync(process.execPath, [tsc, "-p", fileURLToPath(new URL("../tsconfig.json", import.meta.url))], {
      stdio: ["ignore", "inherit", "inherit"],
    });
    if (build.status !== 0) {
      console.error("mq-gateway: the build failed (see above)");
      process.exit(1);
    }
  }

  const { main } = await import(built.href);
  main(process.argv.slice(2)).then(
    (code) => {
      if (typeof code === "number") process.exitCode = code;
    },
    (error) => {
      console.error(error instanceof Error ? error.message : String(error));
      process.exitCode = 1;
    },
  );
}
