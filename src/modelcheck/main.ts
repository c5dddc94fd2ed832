// `npm run model-check`: explores every model, prints what it found, exits 1 when a property is broken.
import { machines } from "../machines/index.js";
import { models } from "./models/index.js";
import { runModelCheck } from "./run.js";
import { systems } from "./systems/index.js";

process.exitCode = runModelCheck(
  [...models, ...systems],
  machines.map((m) => m.id),
  (text) => process.stdout.write(text),
);
