#!/usr/bin/env node
// The built CLI; `npm run build` (or `npm test`) produces dist/.
import { main } from "../dist/cli/main.js";

main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === "number") process.exitCode = code;
  },
  (error) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exitCode = 1;
  },
);
