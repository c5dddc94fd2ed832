#!/usr/bin/env node
// The mq-gateway command. A package from npm ships dist/ built; a git clone builds it on
// `npm install` (the prepare script) or, failing that, here on the first run.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const built = new URL("../dist/cli/main.js", import.meta.url);

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
